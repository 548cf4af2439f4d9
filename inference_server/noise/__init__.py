"""Seeded noise: ε(seed, Hugging Face tensor name) as a pure function, and the arithmetic built on it.

Every backend and the exporter build perturbations and updates from this package, so a seed means
the same perturbation everywhere (on one device type). Two kinds, chosen per run (`es.noise`,
`seedcast serve --noise`), never mixed in one run:

- `gaussian` (gaussian.py, the default): fresh seeded `torch.randn` per tensor;
- `table` (table.py): slices of one fixed table of Gaussian samples, about 3× cheaper on a CPU.

    source.py        the NoiseSource protocol (the seed hash itself is proto/seeds.py, shared with the optimizer)
    kinds.py         noise kind and rounding names (torch-free) -> source
    apply.py         perturb, update (by update rule) and fingerprint weights from a source
    update_rules.py  the update rules by name and their parameters (torch-free), checked before any weight moves
    rounding.py      stochastic rounding to bfloat16
"""
