import paddle

from . import RearrangeMixin, ReduceMixin


class Rearrange(RearrangeMixin, paddle.nn.Layer):
    def forward(self, x):
        return self._rearrange(x)


class Reduce(ReduceMixin, paddle.nn.Layer):
    def forward(self, x):
        return self._reduce(x)
