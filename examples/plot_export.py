"""
Deployment: exporting a fitted model
====================================

:func:`~sktree_lmc.export_onnx` writes a fitted estimator as one
self-contained ONNX file, and :func:`~sktree_lmc.export_module` turns it into
one PyTorch module: the input encoding (quantile transform, one-hot
categories, missing indicators) and the trees, in plain operations, needing
neither scikit-learn nor pandas at prediction time. This example fits a
classifier on a small DataFrame with a categorical column and missing
values, exports it both ways, and checks that onnxruntime and the module
compute the estimator's predictions.
"""

# %%
# A DataFrame with a category and missing values
# ----------------------------------------------
# Two numeric columns (one with missing values), a string column and a
# pandas ``category`` column; the estimator encodes them itself.
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from sktree_lmc import SoftTreeEnsembleClassifier, encode_categories, export_module

rng = np.random.RandomState(0)
n = 600
frame = pd.DataFrame({
    "income": rng.lognormal(10, 0.5, n),
    "age": rng.randint(18, 90, n).astype(float),
    "plan": rng.choice(["basic", "plus", "pro"], n),
    "region": pd.Categorical(rng.choice(["north", "south", "east", "west"], n)),
})
frame.loc[rng.rand(n) < 0.1, "income"] = np.nan
frame.loc[rng.rand(n) < 0.05, "plan"] = None
logit = (np.log(frame["income"].fillna(20000)) - 10) * 2 + (frame["plan"] == "pro") * 1.5
y = (logit + rng.logistic(size=n) > 0.5).astype(int)

clf = SoftTreeEnsembleClassifier(n_estimators=32, depth=3, max_epochs=10,
                                 random_state=0).fit(frame, y)

# %%
# Export
# ------
# The module takes one float64 tensor: numeric columns as they are,
# categorical columns as *category codes*, the index of each value in
# ``encoder_.categories_`` (``-1`` for a category unseen in ``fit``, ``NaN``
# for a missing value). :func:`~sktree_lmc.encode_categories` computes
# this array from raw rows; a serving system without pandas maps its
# strings to the same codes with the lists of categories. Keep the codes in
# float64: the module encodes in float64, as the estimator does, while float32
# codes would round ``income`` (values around 30,000) before the encoding.
module = export_module(clf)
print({name: cats.tolist() for name, cats in zip(frame.columns, clf.encoder_.categories_)
       if cats is not None})
codes = encode_categories(clf, frame)
print(pd.DataFrame(codes[:4], columns=frame.columns))

# %%
# The module computes the estimator's
# :meth:`~sktree_lmc.SoftTreeEnsembleClassifier.decision_function` (the
# logit of class 1); new rows with an unseen category and missing values
# included:
new = pd.DataFrame({"income": [np.nan, 30000.0], "age": [40.0, np.nan],
                    "plan": ["enterprise", "pro"],
                    "region": pd.Categorical(["north", None])})
X_all = pd.concat([frame, new], ignore_index=True)
with torch.no_grad():
    scores = module(torch.tensor(encode_categories(clf, X_all), dtype=torch.float64)).numpy()
reference = clf.decision_function(X_all)
print(f"max |module - estimator| = {np.abs(scores - reference).max():.2e}")
assert np.abs(scores - reference).max() < 1e-5
with torch.no_grad():  # float32 codes, for comparison: income is rounded first
    rounded = module(torch.tensor(encode_categories(clf, X_all), dtype=torch.float32)).numpy()
print(f"with float32 codes: max |module - estimator| = "
      f"{np.abs(rounded - reference).max():.2e}")

# %%
# torch.export
# ------------
# :func:`torch.export.export` captures the module as a graph, here with a
# dynamic number of rows; the program can be saved with
# :func:`torch.export.save` and served without this package.
example = torch.tensor(codes[:8], dtype=torch.float64)
program = torch.export.export(module, (example,),
                              dynamic_shapes=({0: torch.export.Dim("batch")},))
exported = program.module()(torch.tensor(encode_categories(clf, new), dtype=torch.float64))
print("torch.export:", exported.numpy(), "estimator:", clf.decision_function(new))

# %%
# One ONNX file
# -------------
# With ``onnx`` and ``onnxruntime`` installed (the ``export`` extra,
# ``pip install -e ".[export]"`` in the clone),
# :func:`~sktree_lmc.export_onnx` writes the model as one ONNX file, the
# categories inside: its inputs are the float64 numeric columns ``X`` and the
# categorical columns as strings ``X_categorical`` (``""`` for a missing
# value), which :func:`~sktree_lmc.onnx_inputs` builds from raw rows; its
# outputs, the estimator's ``predict``, ``predict_proba`` and
# ``decision_function``.
import importlib.util  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402

if all(importlib.util.find_spec(m) for m in ("onnx", "onnxruntime")):
    import onnxruntime

    from sktree_lmc import export_onnx, onnx_inputs

    path = export_onnx(clf, os.path.join(tempfile.mkdtemp(), "model.onnx"))
    print(os.listdir(os.path.dirname(path)), f"{os.path.getsize(path) / 1e3:.0f} kB")
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = onnx_inputs(clf, X_all)
    print({name: array[-2:].tolist() for name, array in feed.items()})
    labels, proba, onnx_scores = session.run(None, feed)
    print(f"max |onnxruntime - estimator| = {np.abs(onnx_scores - reference).max():.2e}")
    assert np.abs(onnx_scores - reference).max() < 1e-5
    assert (labels == clf.predict(X_all)).all()
else:
    print("onnx or onnxruntime is not installed: ONNX export skipped")

# %%
# Exported and estimator outputs
# ------------------------------
# Every row lies on the diagonal: on float64 codes the module reproduces the
# estimator up to float32 rounding of the trees' arithmetic (about 1e-6 here);
# float32 codes cost up to 5e-2.
fig, ax = plt.subplots(figsize=(4.5, 4))
ax.scatter(reference, scores, s=8, alpha=0.6)
lims = [reference.min(), reference.max()]
ax.plot(lims, lims, color="gray", lw=1)
ax.set_xlabel("clf.decision_function(X)")
ax.set_ylabel("export_module(clf)(codes)")
ax.set_title("Exported module vs estimator")
fig.tight_layout()
plt.show()
