"""How fitted estimators pickle: plain types, and one layout version.

A fitted soft tree ensemble pickles its fitted objects as plain types (the
architecture as ``(name, depth)``, the parameters and Adam's moments as
dicts of arrays, the encoders and a merge report as dicts), so that :mod:`skops.io` loads it
with only the estimator classes trusted. Every state carries
:data:`PICKLE_FORMAT`; a state without it, or with another one, was written
by another version of the package and is refused with a clear error instead
of being loaded into a model that would predict something else.

Nothing here imports the estimators.
"""

from __future__ import annotations

import dataclasses

import torch

from .model._architectures import TreeArchitecture, get_architecture
from .encoding._encoding import TabularEncoder
from .model._params import TreeParams
from .training._objective import Objective, objective_from_dict

__all__: list = []

#: The layout of a pickled estimator's state. Raise it whenever a change
#: makes an older state load wrongly (renamed or re-encoded attributes).
PICKLE_FORMAT = 2
#: The key of :data:`PICKLE_FORMAT` in a pickled state.
FORMAT_KEY = "_sktree_lmc_pickle_format"
#: The key marking an encoder stored as its dict.
_ENCODER_KEY = "__tabular_encoder__"
#: The key marking a merge report stored as its dict.
_REPORT_KEY = "__merge_report__"
#: The key marking a fitted objective stored as its dict.
_OBJECTIVE_KEY = "__objective__"
#: The fitted state every fitted estimator holds (checked when loaded).
REQUIRED_FITTED_ATTRS = ("tree_params_", "architecture_", "encoder_", "n_features_in_",
                         "n_outputs_", "objective_")
#: The key marking a ``device`` parameter given as a :class:`torch.device`.
_DEVICE_KEY = "__torch_device__"


def stamp(state):
    """``state`` (a dict, changed in place) marked with :data:`PICKLE_FORMAT`."""
    state[FORMAT_KEY] = PICKLE_FORMAT
    return state


def check_format(state, cls):
    """A ValueError naming ``cls`` and both versions when ``state`` was not
    pickled with this version's layout; the state without its mark."""
    state = dict(state)
    found = state.pop(FORMAT_KEY, None)
    if found != PICKLE_FORMAT:
        from . import __version__

        written = ("a version of sktree_lmc before pickle formats were recorded"
                   if found is None else f"pickle format {found!r}")
        raise ValueError(
            f"This {cls.__name__} was pickled by {written}; sktree_lmc {__version__} reads "
            f"pickle format {PICKLE_FORMAT} only. Load it with the version that saved it "
            "and refit it, or fit it again with this version."
        )
    return state


def params_as_dict(params):
    """A :class:`TreeParams` as a plain dict of its arrays (the additive
    table only when there is one)."""
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(TreeParams)
            if getattr(params, f.name) is not None}


def encoder_as_dict(encoder):
    """A :class:`TabularEncoder` (fitted or not) as a plain marked dict."""
    return {_ENCODER_KEY: encoder.to_dict()}


def encoder_from_dict(value):
    """The encoder of :func:`encoder_as_dict`; anything else as it is."""
    if isinstance(value, dict) and _ENCODER_KEY in value:
        return TabularEncoder.from_dict(value[_ENCODER_KEY])
    return value


def estimator_state(state):
    """A soft tree ensemble's ``__dict__`` (a copy) with its fitted objects
    in plain types, marked with the pickle format."""
    state = dict(state)
    arch = state.get("architecture_")
    if isinstance(arch, TreeArchitecture):
        state["architecture_"] = (arch.name, arch.depth)
    params = state.get("tree_params_")
    if isinstance(params, TreeParams):
        state["tree_params_"] = params_as_dict(params)
    opt = state.get("optimizer_state_")
    if isinstance(opt, dict):  # Adam's moments, also as plain dicts of arrays
        state["optimizer_state_"] = {
            k: params_as_dict(v) if isinstance(v, TreeParams) else v for k, v in opt.items()
        }
    for key in ("encoder_", "encoder"):
        if isinstance(state.get(key), TabularEncoder):
            state[key] = encoder_as_dict(state[key])
    if isinstance(state.get("objective_"), Objective):
        state["objective_"] = {_OBJECTIVE_KEY: state["objective_"].to_dict()}
    if dataclasses.is_dataclass(state.get("merge_report_")):  # a MergeReport
        state["merge_report_"] = {_REPORT_KEY: dataclasses.asdict(state["merge_report_"])}
    if isinstance(state.get("device"), torch.device):  # skops would need it trusted
        state["device"] = {_DEVICE_KEY: str(state["device"])}
    return stamp(state)


def check_complete_state(state, cls, fitted_keys=None):
    """A ValueError naming ``cls`` and what is missing when the state of a
    ``cls`` lacks one of its parameters or, fitted (``fitted_keys[0]``, set
    last by ``fit``, is in it), one of ``fitted_keys`` (default:
    :data:`REQUIRED_FITTED_ATTRS`)
    instead of an AttributeError at the first use: an edited or incomplete
    state."""
    missing = [name for name in cls._get_param_names() if name not in state]
    fitted_keys = REQUIRED_FITTED_ATTRS if fitted_keys is None else fitted_keys
    if fitted_keys and fitted_keys[0] in state:  # fitted: all of them
        missing += [name for name in fitted_keys if name not in state]
    if missing:
        raise ValueError(
            f"This {cls.__name__} state lacks {missing}: it was edited or is incomplete. "
            "Load an unaltered file, or fit the model again."
        )


def restore_estimator_state(state, cls):
    """The ``__dict__`` of :func:`estimator_state`, its objects rebuilt; a
    ValueError for a state of another pickle format."""
    state = check_format(state, cls)
    check_complete_state(state, cls)
    for key in ("encoder_", "encoder"):
        if key in state:
            state[key] = encoder_from_dict(state[key])
    objective = state.get("objective_")
    if isinstance(objective, dict) and _OBJECTIVE_KEY in objective:
        state["objective_"] = objective_from_dict(objective[_OBJECTIVE_KEY])
    report = state.get("merge_report_")
    if isinstance(report, dict) and _REPORT_KEY in report:
        from .merging._report import MergeReport  # merging sits above the estimators

        state["merge_report_"] = MergeReport(**report[_REPORT_KEY])
    device = state.get("device")
    if isinstance(device, dict) and _DEVICE_KEY in device:
        state["device"] = torch.device(str(device[_DEVICE_KEY]))
    arch = state.get("architecture_")
    if isinstance(arch, (tuple, list)):
        name, depth = arch
        state["architecture_"] = get_architecture(str(name), int(depth))
    params = state.get("tree_params_")
    if isinstance(params, dict):
        state["tree_params_"] = TreeParams(**params)
    opt = state.get("optimizer_state_")
    if isinstance(opt, dict):
        state["optimizer_state_"] = {
            k: TreeParams(**v) if isinstance(v, dict) else v for k, v in opt.items()
        }
    return state
