"""Encoding of raw tabular columns into the features the trees split on.

Lives here: the column kinds, one class per kind in a table, whose instances are fitted
columns holding their own state (``_column_encodings``: quantile-normal, standard,
piecewise-linear, categories, missing values), the encoder that is a list of them plus the
additive term's bins (``_encoding.TabularEncoder``, ``_additive_bins``) and what makes
encoders fitted apart comparable: their summaries, unions and probe rows
(``_common_encoding``). The modules reach each other through public names only.

May import: ``sktree_lmc.utils``.
"""

from ._encoding import TabularEncoder

__all__ = ["TabularEncoder"]
