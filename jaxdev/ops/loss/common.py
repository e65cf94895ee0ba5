"""What every loss shares: the reduction codes aten passes (at::Reduction)."""

NONE, MEAN, SUM = 0, 1, 2
