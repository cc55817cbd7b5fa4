"""run_loop: hook order, should_stop, after_train always, iteration count."""
import pytest

from gluontrain.core.loop import EVENTS, Hook, TrainState, run_loop


class Recorder(Hook):
    def __init__(self, log, name='r'):
        self.log, self.name = log, name

    def __getattribute__(self, attr):
        if attr in EVENTS:
            log, name = object.__getattribute__(self, 'log'), object.__getattribute__(self, 'name')
            return lambda state: log.append((name, attr, state.epoch, state.batch))
        return object.__getattribute__(self, attr)


def test_event_order_two_hooks_two_epochs():
    log = []
    steps = []
    state = run_loop(lambda b, s: steps.append(b) or {'b': b}, [10, 11],
                     [Recorder(log, 'a'), Recorder(log, 'b')], start_epoch=3, epochs=5)
    assert steps == [10, 11, 10, 11]
    assert state.iteration == 4 and state.outputs == {'b': 11}
    names = [(h, e) for h, e, _, _ in log]
    per_epoch = [('a', 'before_epoch'), ('b', 'before_epoch')] + [
        (h, e) for _ in range(2) for e in ('before_batch', 'after_batch') for h in ('a', 'b')] + [
        ('a', 'after_epoch'), ('b', 'after_epoch')]
    assert names == [('a', 'before_train'), ('b', 'before_train')] + per_epoch * 2 + [
        ('a', 'after_train'), ('b', 'after_train')]
    assert [ep for _, e, ep, _ in log if e == 'before_epoch'] == [3, 3, 4, 4]


class StopAt(Hook):
    def __init__(self, event, iteration):
        self.event, self.iteration = event, iteration
        self.seen = []

    def _check(self, event, state):
        self.seen.append(event)
        if event == self.event and state.iteration >= self.iteration:
            state.stop('planted')

    def before_batch(self, state):
        self._check('before_batch', state)

    def after_batch(self, state):
        self._check('after_batch', state)

    def after_epoch(self, state):
        self._check('after_epoch', state)

    def after_train(self, state):
        self.seen.append('after_train')


@pytest.mark.parametrize('event,expected_steps', [('after_batch', 3), ('before_batch', 3),
                                                  ('after_epoch', 4)])
def test_should_stop_is_checked_after_every_event(event, expected_steps):
    log = []
    stopper = StopAt(event, 3)
    # the second hook still runs for the event that set the flag
    state = run_loop(lambda b, s: {}, range(2), [stopper, Recorder(log)], 0, 10)
    assert state.should_stop and state.stop_reason == 'planted'
    assert state.iteration == expected_steps
    assert log[-2][1] == event  # the later hook saw the same event...
    assert log[-1][1] == 'after_train'  # ...and then only after_train ran
    assert stopper.seen[-1] == 'after_train'


def test_after_train_runs_when_the_step_raises():
    log = []

    def step(batch, state):
        if state.iteration == 1:
            raise RuntimeError('boom')
        return {}

    with pytest.raises(RuntimeError, match='boom'):
        run_loop(step, range(5), [Recorder(log)], 0, 2)
    assert log[-1][1] == 'after_train'


def test_restored_state_keeps_counting_iterations():
    state = run_loop(lambda b, s: {}, range(3), [], 2, 4, TrainState(iteration=6))
    assert state.iteration == 12 and state.epoch == 3 and state.start_epoch == 2


def test_validation_score_lives_for_the_epoch_that_measured_it():
    seen = []

    class _ValidateEpoch0(Hook):
        def before_epoch(self, state):
            seen.append(('before', state.epoch, 'val' in state.scores))

        def after_epoch(self, state):
            if state.epoch == 0:
                state.scores['val'] = (['mAP'], [0.5])
            seen.append(('after', state.epoch, 'val' in state.scores))

    state = run_loop(lambda batch, state: {}, range(1), [_ValidateEpoch0()], 0, 2)
    assert seen == [('before', 0, False), ('after', 0, True),
                    ('before', 1, False), ('after', 1, False)]
    assert 'val' not in state.scores
    # the last epoch's score stays for the caller
    state = run_loop(lambda batch, state: {}, range(1), [_ValidateEpoch0()], 0, 1)
    assert state.scores['val'] == (['mAP'], [0.5])


class _Events(Hook):
    """Records (event, epoch, iteration) for the events that close or end a run."""

    def __init__(self):
        self.log = []

    def after_epoch(self, state):
        self.log.append(('after_epoch', state.epoch, state.iteration))

    def after_train(self, state):
        self.log.append(('after_train', state.epoch, state.iteration))


@pytest.mark.parametrize('sized', [True, False])
def test_max_iter_on_a_pass_boundary_closes_that_pass(sized):
    # 3 batches per pass, budget 6: the budget ends exactly with pass 1
    data = range(3) if sized else _Unsized(3)
    events = _Events()
    state = run_loop(lambda b, s: {}, data, [events], 0, None, max_iter=6)
    assert state.iteration == 6 and state.stop_reason == 'max_iter 6 reached'
    assert events.log == [('after_epoch', 0, 3), ('after_epoch', 1, 6), ('after_train', 1, 6)]


def test_max_iter_inside_a_pass_leaves_it_open():
    events = _Events()
    state = run_loop(lambda b, s: {}, range(3), [events], 0, None, max_iter=5)
    assert state.iteration == 5 and state.epoch == 1 and state.batch == 1
    assert events.log == [('after_epoch', 0, 3), ('after_train', 1, 5)]


def test_epochs_end_before_the_budget_and_budget_already_spent():
    state = run_loop(lambda b, s: {}, range(3), [], 0, 2, max_iter=100)
    assert state.iteration == 6 and not state.should_stop
    events = _Events()
    state = run_loop(lambda b, s: {}, range(3), [events], 2, None, TrainState(iteration=6),
                     max_iter=6)
    assert state.iteration == 6 and state.stop_reason == 'max_iter 6 already reached'
    assert events.log == [('after_train', 0, 6)]


def test_a_hook_stop_on_the_last_batch_does_not_close_the_epoch():
    # a NaN stop must not write the epoch's checkpoint: only the budget closes an epoch
    events = _Events()
    state = run_loop(lambda b, s: {}, range(3), [StopAt('after_batch', 3), events], 0, None,
                     max_iter=3)
    assert state.stop_reason == 'planted' and events.log == [('after_train', 0, 3)]


def test_run_loop_needs_a_bound():
    with pytest.raises(ValueError, match='epochs or max_iter'):
        run_loop(lambda b, s: {}, range(3), [], 0, None)


def test_period_epochs_iterations_and_final():
    from gluontrain.core.loop import Period
    per_epoch, per_iter = Period(epochs=2), Period(iterations=4, at_max_iter=True)
    assert [e for e in range(6) if per_epoch.epoch_due(TrainState(epoch=e))] == [1, 3, 5]
    assert not per_epoch.iteration_due(TrainState(iteration=4))
    due = [i for i in range(1, 11) if per_iter.iteration_due(TrainState(iteration=i,
                                                                        max_iter=10))]
    assert due == [4, 8, 10] and not per_iter.epoch_due(TrainState(epoch=3))


class _Unsized:
    """An iterable without ``len`` (a streaming loader)."""

    def __init__(self, n):
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


def test_the_first_stop_reason_wins():
    class _NaNThenBudget(Hook):
        def after_batch(self, state):
            if state.iteration == 2:
                state.stop('non-finite loss')
    state = run_loop(lambda b, s: {}, range(4), [_NaNThenBudget()], 0, None, max_iter=2)
    assert state.stop_reason == 'non-finite loss'
    state = TrainState()
    state.stop('first')
    state.stop('second')
    assert state.should_stop and state.stop_reason == 'first'


def test_an_error_carries_the_loop_state_for_the_cli():
    def step(batch, state):
        if state.iteration == 3:
            raise KeyboardInterrupt
        return {}
    with pytest.raises(KeyboardInterrupt) as info:
        run_loop(step, range(2), [], 0, 5, TrainState(last_checkpoint='r_last.ckpt'))
    state = info.value.train_state
    assert (state.epoch, state.batch, state.iteration) == (1, 1, 3)
    assert state.last_checkpoint == 'r_last.ckpt'


class _FailingAfterTrain(Hook):
    def __init__(self, log):
        self.log = log

    def after_train(self, state):
        self.log.append('failing')
        raise OSError(28, 'No space left on device')


class _Closes(Hook):
    def __init__(self, log):
        self.log = log

    def after_train(self, state):
        self.log.append('closed')


def test_a_hook_failing_while_unwinding_does_not_hide_the_first_error():
    log = []

    def step(batch, state):
        raise ValueError('the first error')
    with pytest.raises(ValueError, match='the first error'):
        run_loop(step, range(2), [_FailingAfterTrain(log), _Closes(log)], 0, 1)
    # every hook's after_train ran (the log handlers still close)
    assert log == ['failing', 'closed']


def test_a_hook_failing_at_a_normal_end_still_raises_after_all_ran():
    log = []
    with pytest.raises(OSError, match='No space'):
        run_loop(lambda b, s: {}, range(2), [_FailingAfterTrain(log), _Closes(log)], 0, 1)
    assert log == ['failing', 'closed']


def test_main_process_only_hooks_run_on_rank_zero_only():
    class Sink(Recorder):
        main_process_only = True

    class Comm:
        rank, world_size = 1, 2
    for comm, expected in ((None, {'all', 'sink'}), (Comm(), {'all'})):
        log = []
        state = run_loop(lambda b, s: {}, [0], [Recorder(log, 'all'), Sink(log, 'sink')], 0, 1,
                         comm=comm)
        assert {name for name, *_ in log} == expected
        assert state.is_main is (comm is None)
    # a state that already knows its rank (a recipe set it) is honoured without a comm
    log = []
    run_loop(lambda b, s: {}, [0], [Sink(log, 'sink')], 0, 1, TrainState(rank=2, world_size=4))
    assert log == []
