"""The weight average of the fits (``WeightAverage``): its EMA update, which skips
``AveragedModel.update_parameters``' walk over the modules after the first update, keeps
that method's results bit for bit."""

import torch

from sktree_lmc.model._architectures import get_architecture
from sktree_lmc.model._forward import SoftTreeEnsembleModule
from sktree_lmc.training._training import WeightAverage, _warmup_ema


def _module(seed):
    gen = torch.Generator().manual_seed(seed)
    module = SoftTreeEnsembleModule(get_architecture("oblivious", 2), 4, 3, 2, generator=gen,
                                    n_additive=5)
    module.additive_scale = torch.rand(5, 1, generator=gen)
    return module


def test_the_ema_steps_are_averaged_models_bit_for_bit():
    from torch.optim.swa_utils import AveragedModel

    module = _module(0)
    average = WeightAverage(module, "ema", decay=0.9)
    reference = AveragedModel(module, multi_avg_fn=_warmup_ema(0.9), use_buffers=False)
    gen = torch.Generator().manual_seed(1)
    for step in range(25):
        with torch.no_grad():
            for p in module.parameters():
                p.add_(torch.randn(p.shape, generator=gen))
            if step == 10:  # a buffer changed: copied, as update_parameters does
                module.additive_scale.mul_(2.0)
        average.after_step(module)
        reference.update_parameters(module)
        ours = dict(average.averaged.module.named_parameters())
        for name, p in reference.module.named_parameters():
            assert torch.equal(ours[name], p), (step, name)
        assert torch.equal(average.averaged.module.additive_scale, reference.module.additive_scale)
        assert int(average.averaged.n_averaged) == int(reference.n_averaged) == step + 1
    assert average.module_for(module) is average.averaged.module


def test_another_module_takes_update_parameters_again():
    """A module other than the last one's (a new compact copy) is read afresh."""
    first, second = _module(0), _module(2)
    average = WeightAverage(first, "ema", decay=0.5)
    average.after_step(first)
    average.after_step(first)
    average.after_step(second)
    expected = first.split_weight.detach().clone()
    expected.lerp_(second.split_weight.detach(), 1.0 - min(0.5, 3 / 12))
    assert torch.equal(average.averaged.module.split_weight, expected)
