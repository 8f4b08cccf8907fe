"""Plants a lazy output: forward returns a tensor subclass that holds the inputs and computes RMSNorm
only when an op first reads it (its dispatch hook is attached under a name built at run time, so
the source audit cannot see it: the plain-output check must). Timed calls would do no work
(appended to rmsnorm_cpp.py)."""
# ruff: noqa: F821  (torch, nn and ModelNew come from rmsnorm_cpp.py, which this is appended to)


class Deferred(torch.Tensor):
    pass


def _materialise(cls, func, types, args=(), kwargs=None):
    def real(t):
        if isinstance(t, Deferred):
            x, w, eps = t._pending
            return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))
        return t

    return func(*[real(a) for a in args], **{k: real(v) for k, v in (kwargs or {}).items()})


setattr(Deferred, "__torch_" + "dispatch__", classmethod(_materialise))
_Eager = ModelNew


class ModelNew(_Eager):
    def forward(self, x):
        out = torch.Tensor._make_wrapper_subclass(Deferred, x.shape, dtype=x.dtype, device=x.device)
        out._pending = (x.clone(), self.weight.detach(), self.eps)
        return out
