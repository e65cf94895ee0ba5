"""Matrix decompositions and solvers of torch.linalg (and their legacy torch.* names)."""
