"""Speed under torch.compile (not the paper): §3.3's activation taken over a (rows, d_ff) view.

Over the (B, L, d_ff) tensor, inductor's partitioner saves a boolean mask of the ReLU for the backward
beside the output that the second Linear saves anyway (a (B·L, d_ff) view of it, which it does not relate),
and inductor's CPU code writes booleans slowly (benchmarks/RESULTS.md, the compiled step). Over the 2-D
view the backward takes the mask from the saved output. The same numbers: the activation is elementwise,
the views free.
"""

import torch


class RowwiseActivation:
    def __init__(self, activation):
        self.activation = activation

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.activation(x.reshape(-1, x.shape[-1])).view(x.shape)

    def __repr__(self) -> str:
        return f"RowwiseActivation({getattr(self.activation, '__name__', self.activation)})"
