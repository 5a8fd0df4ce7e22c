"""Reward signals: a base contract, extrinsic, curiosity, GAIL/VAIL, and a factory."""
