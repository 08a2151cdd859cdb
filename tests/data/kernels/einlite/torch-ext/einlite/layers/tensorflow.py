import tensorflow as tf

from . import RearrangeMixin, ReduceMixin


class Rearrange(RearrangeMixin, tf.keras.layers.Layer):
    def call(self, inputs):
        return self._rearrange(inputs)


class Reduce(ReduceMixin, tf.keras.layers.Layer):
    def call(self, inputs):
        return self._reduce(inputs)
