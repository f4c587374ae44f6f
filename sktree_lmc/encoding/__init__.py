"""Encoding of raw tabular columns into the features the trees split on.

Lives here: the column kinds as a table (``_column_encodings``: quantile-normal, standard,
piecewise-linear, categories, missing values), the encoder that applies them
(``_encoding.TabularEncoder``), the additive term's bins (``_additive_bins``) and what makes
encoders fitted apart comparable: their summaries, unions and probe rows
(``_common_encoding``).

May import: ``sktree_lmc.utils``.
"""

from ._encoding import TabularEncoder

__all__ = ["TabularEncoder"]
