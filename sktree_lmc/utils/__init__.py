"""Small services the other subpackages share: the device a model runs on, the
thread limits of a fit, and progress lines.

Lives here: ``_device`` (resolving ``device=``, where predictions run), ``_threads``
(``n_threads`` as torch's and numba's thread limits), ``_progress`` (``verbose`` output).

May import: nothing of ``sktree_lmc``.
"""


__all__: list = []
