"""``torch.optim.SGD`` without the compiler stack: ``torch.optim.Optimizer``'s wrapped methods
import ``torch._dynamo`` on first call (docs/performance.md, "On the README main job's
settings"); :class:`SGD` here has the same update, state dict and arguments without it."""
import torch
from torch.optim.sgd import sgd

__all__ = ['SGD', 'without_compiler']


def without_compiler(method):
    """The function inside a ``torch._disable_dynamo`` wrapper (the method itself when it has
    none): the same method, without the compiler's import on first call."""
    return getattr(method, '__wrapped__', method)


class SGD(torch.optim.SGD):
    """``torch.optim.SGD`` (same arguments, update and state dict) whose methods never import
    ``torch._dynamo``.

    ``step`` is ``torch.optim.SGD.step``'s body under ``torch.no_grad()`` (what
    ``_use_grad_for_differentiable`` does with ``differentiable=False``, less its compiler
    graph break); ``differentiable=True`` is refused.
    """

    add_param_group = without_compiler(torch.optim.Optimizer.add_param_group)
    zero_grad = without_compiler(torch.optim.Optimizer.zero_grad)
    state_dict = without_compiler(torch.optim.Optimizer.state_dict)
    load_state_dict = without_compiler(torch.optim.Optimizer.load_state_dict)

    def __init__(self, params, *args, **kwargs):
        if kwargs.get('differentiable'):
            raise ValueError('gluontrain.torch.optim.SGD: differentiable=True needs '
                             'torch.optim.SGD itself')
        super().__init__(params, *args, **kwargs)

    @torch.no_grad()
    def step(self, closure=None):  # pylint: disable=arguments-differ
        """One update of every parameter with a gradient; returns ``closure()``'s loss."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params, grads, momentum_buffers = [], [], []
            has_sparse_grad = self._init_group(group, params, grads, momentum_buffers)
            sgd(params, grads, momentum_buffers, weight_decay=group['weight_decay'],
                momentum=group['momentum'], lr=group['lr'], dampening=group['dampening'],
                nesterov=group['nesterov'], maximize=group['maximize'],
                has_sparse_grad=has_sparse_grad, foreach=group['foreach'],
                fused=group['fused'], grad_scale=getattr(self, 'grad_scale', None),
                found_inf=getattr(self, 'found_inf', None))
            if group['momentum'] != 0:
                for p, buf in zip(params, momentum_buffers):
                    self.state[p]['momentum_buffer'] = buf
        return loss
