"""Shipping fitted models as torch modules and ONNX files.

Lives here: ``export_module`` and ``encode_categories`` (``_export``) and the one-call ONNX
export (``_onnx``). The versioned state of pickles and skops files belongs to the estimators
(``sktree_lmc._persistence``).

May import: every other subpackage and the estimators.
"""

from ._export import encode_categories, export_module
from ._onnx import export_onnx, onnx_inputs

__all__ = ["encode_categories", "export_module", "export_onnx", "onnx_inputs"]
