"""Adam and RMSprop for the learners, without ``torch.optim``.

Building any ``torch.optim.Optimizer`` imports ``torch._dynamo`` (its methods are wrapped
to stay out of compilation); on the H200 machine that import took 4.5 s, three times a
whole CartPole training run on the GPU. These two classes do the same arithmetic with
torch's multi-tensor kernels — Adam calls the fused kernel that
``torch.optim.Adam(fused=True)`` calls and matches it bit for bit; RMSprop mirrors the
multi-tensor path of ``torch.optim.RMSprop`` (``capturable=True``, no momentum, not
centered) — and:

- keep the step count and the learning rate in tensors on the parameters' device, so a
  CUDA graph can capture :meth:`step` and :meth:`set_learning_rate` changes the rate of a
  captured step between replays;
- create their state up front and :meth:`load_state_dict` copies into it, so the tensors
  keep their addresses (a captured graph stays valid);
- save ``state_dict()`` in ``torch.optim``'s layout (``state`` per parameter index,
  ``param_groups``), loadable with ``torch.load(weights_only=True)``.

One parameter group, no weight decay, no AMSGrad: what the learners need.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch


class _TensorOptimizer:
    """Shared parts: parameters, the device step count and learning rate, state I/O."""

    state_names: tuple[str, ...] = ()
    hyper: tuple[str, ...] = ()

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, **hyper: Any):
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("the optimizer got no trainable parameters")
        device = self.params[0].device
        if any(p.device != device for p in self.params):
            raise ValueError("all parameters must be on one device")
        self.device = device
        self.hyperparameters = dict(hyper)
        self.lr = torch.tensor(float(lr), dtype=torch.float32, device=device)
        self.step_count = torch.zeros((), dtype=torch.float32, device=device)
        self.state = {name: [torch.zeros_like(p, memory_format=torch.preserve_format)
                             for p in self.params] for name in self.state_names}

    @property
    def learning_rate(self) -> float:
        """The current rate (reads the device tensor: a sync on a GPU)."""
        return float(self.lr)

    def set_learning_rate(self, value: float) -> None:
        """Write the rate in place (ordered on the current stream, no sync)."""
        self.lr.fill_(float(value))

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    def _grads(self) -> list[torch.Tensor]:
        grads = [p.grad for p in self.params]
        if any(g is None for g in grads):
            missing = [i for i, g in enumerate(grads) if g is None]
            raise RuntimeError(f"parameters {missing} have no gradient; call backward() first")
        return grads  # type: ignore[return-value]

    def state_dict(self) -> dict[str, Any]:
        """``torch.optim``'s layout: ``{"state": {i: {...}}, "param_groups": [{...}]}``."""
        state = {i: {"step": self.step_count.clone(),
                     **{name: self.state[name][i].clone() for name in self.state_names}}
                 for i in range(len(self.params))}
        group = {"lr": self.learning_rate, **self.hyperparameters,
                 "params": list(range(len(self.params)))}
        return {"state": state, "param_groups": [group]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Copy a :meth:`state_dict` (or ``torch.optim``'s of the same algorithm) into
        this optimizer's tensors; checks everything before writing anything."""
        try:
            groups = state_dict["param_groups"]
            state = state_dict["state"]
            if len(groups) != 1 or len(groups[0]["params"]) != len(self.params):
                raise ValueError(f"expected one group of {len(self.params)} parameters")
            ids = groups[0]["params"]
            steps = []
            for i, p in zip(ids, self.params, strict=True):
                entry = state.get(i, {}) if isinstance(state, dict) else {}
                for name in self.state_names:
                    value = entry.get(name)
                    if value is None or tuple(value.shape) != tuple(p.shape):
                        raise ValueError(f"state {name!r} of parameter {i} is missing or "
                                         f"has the wrong shape")
                steps.append(float(entry.get("step", 0.0)))
            lr = float(groups[0]["lr"])
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not an optimizer state dict: {exc!r}") from None
        if len(set(steps)) > 1:
            raise ValueError("parameters have different step counts")
        for i, index in enumerate(ids):
            for name in self.state_names:
                self.state[name][i].copy_(state[index][name])
        self.step_count.fill_(steps[0] if steps else 0.0)
        self.set_learning_rate(lr)


class Adam(_TensorOptimizer):
    """Adam (Kingma & Ba), bias-corrected, with torch's fused kernel.

    Args:
        params: the parameters to train.
        lr: learning rate.
        betas: ``(beta1, beta2)``.
        eps: added to the denominator.
    """

    state_names = ("exp_avg", "exp_avg_sq")

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, lr, betas=tuple(betas), eps=float(eps))

    @torch.no_grad()
    def step(self) -> None:
        beta1, beta2 = self.hyperparameters["betas"]
        self.step_count.add_(1.0)
        torch._fused_adam_(
            self.params, self._grads(), self.state["exp_avg"], self.state["exp_avg_sq"], [],
            [self.step_count] * len(self.params), lr=self.lr, beta1=beta1, beta2=beta2,
            weight_decay=0.0, eps=self.hyperparameters["eps"], amsgrad=False, maximize=False)


class RMSprop(_TensorOptimizer):
    """RMSprop (no momentum, not centered), as ``torch.optim.RMSprop`` computes it.

    Args:
        params: the parameters to train.
        lr: learning rate.
        alpha: smoothing constant of the squared-gradient average.
        eps: added to the denominator.
    """

    state_names = ("square_avg",)

    def __init__(self, params: Iterable[torch.nn.Parameter], lr: float, alpha: float = 0.99,
                 eps: float = 1e-8):
        super().__init__(params, lr, alpha=float(alpha), eps=float(eps))

    @torch.no_grad()
    def step(self) -> None:
        alpha, eps = self.hyperparameters["alpha"], self.hyperparameters["eps"]
        grads = self._grads()
        self.step_count.add_(1.0)
        square_avgs = self.state["square_avg"]
        torch._foreach_mul_(square_avgs, alpha)
        torch._foreach_addcmul_(square_avgs, grads, grads, value=1 - alpha)
        avg = torch._foreach_sqrt(square_avgs)
        torch._foreach_add_(avg, eps)
        torch._foreach_div_(avg, -self.lr)
        torch._foreach_addcdiv_(self.params, grads, avg)
