from .tensorflow import Rearrange, Reduce

custom_objects = {"Rearrange": Rearrange, "Reduce": Reduce}
