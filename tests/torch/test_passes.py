"""passes: the skipping batch sampler draws as shuffle=True, RNG-neutral side work, and the
hook that resumes inside a pass."""
import random

import numpy as np
import torch

from gluontrain.core.loop import TrainState, run_loop
from gluontrain.torch.passes import PassPositionHook, preserved_rng, shuffled_loader


def _order(loader, seed):
    torch.manual_seed(seed)
    return [b.tolist() for _ in range(2) for b in loader]


def test_shuffled_loader_gives_the_batches_of_shuffle_true():
    data = list(range(10))
    reference = torch.utils.data.DataLoader(data, 3, shuffle=True)
    ours = shuffled_loader(data, 3)
    assert len(ours) == len(reference) == 4
    assert _order(ours, 5) == _order(reference, 5)
    ours.batch_sampler.skip = 2  # once: the next pass leaves out its first two batches
    torch.manual_seed(5)
    first_pass = [b.tolist() for b in ours]
    assert first_pass == _order(reference, 5)[2:4]
    assert len(list(ours)) == 4


def test_preserved_rng_puts_every_generator_back():
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    with preserved_rng():
        torch.rand(3), random.random(), np.random.rand()
        list(torch.utils.data.DataLoader(list(range(4)), 2))  # draws a base seed
    expected = (torch.rand(1).item(), random.random(), np.random.rand())
    torch.manual_seed(1)
    random.seed(1)
    np.random.seed(1)
    assert (torch.rand(1).item(), random.random(), np.random.rand()) == expected


def _run(loader, hooks, max_iter, state=None):
    seen = []
    state = run_loop(lambda b, s: seen.append(b.tolist() + [torch.rand(1).item()]) or {},
                     loader, hooks, state.iteration // len(loader) if state else 0, None,
                     state, max_iter=max_iter)
    return seen, state


def test_a_run_resumed_inside_a_pass_continues_it_as_the_uninterrupted_run():
    data = list(range(10))
    torch.manual_seed(0)
    loader = shuffled_loader(data, 3)
    full, _ = _run(loader, [PassPositionHook(loader.batch_sampler)], 10)
    torch.manual_seed(0)
    hook = PassPositionHook(loader.batch_sampler)
    first, state = _run(loader, [hook], 6)  # stops after batch 1 of pass 1
    saved, rng = hook.state_dict(), torch.get_rng_state()
    resumed_hook = PassPositionHook(loader.batch_sampler)
    resumed_hook.load_state_dict(saved)
    torch.manual_seed(123)  # a new process; the checkpoint's generator state comes back
    torch.set_rng_state(rng)
    state = TrainState(iteration=6, resume_batch=2)
    rest, state = _run(loader, [resumed_hook], 10, state)
    assert first + rest == full
    assert (state.epoch, state.batch) == (2, 1)
    # without the pass-start state (an older checkpoint) the pass runs again from batch 0
    state = TrainState(iteration=6, resume_batch=2)
    again, state = _run(loader, [PassPositionHook(loader.batch_sampler)], 10, state)
    assert state.resume_batch == 0 and len(again) == 4
