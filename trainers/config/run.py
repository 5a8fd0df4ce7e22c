"""The run's settings beside the behaviors': which environment (``env_settings:``), a
Unity build's engine (``engine_settings:``), checkpoints and run folder
(``checkpoint_settings:``), tower devices (``device_settings:``) and a cluster
(``cluster_settings:``). Frozen dataclasses that validate themselves, as in `schema`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Dict, Mapping, Optional, Tuple

from trainers.config._fields import (
    _InvalidField,
    _check_address,
    _check_bool,
    _check_int,
    _check_number,
    _check_str,
    _describe,
    _normalize_device,
)


#: Most Ray rollout workers one run asks for (each owns environments and a TensorFlow
#: session: thousands never train, they exhaust the cluster).
MAX_RAY_WORKERS = 1024


@dataclass(frozen=True)
class RaySettings:
    """Rollout workers on a Ray cluster (``env_settings.ray:``, ``--ray`` / ``--ray-workers``;
    `trainers.loop.ray_rollouts`): each worker is a Ray actor that owns ``envs_per_worker``
    environments and an acting copy of every behavior's actor."""

    address: Optional[str] = None
    """Ray's address: None (or ``local``) starts Ray in this process; ``auto`` joins the cluster
    that ``ray start`` runs on this machine; ``host:port`` / ``ray://host:port`` another one."""
    num_workers: int = 1
    """Ray actors, each with its environments (spread over the cluster's nodes)."""
    envs_per_worker: int = 1
    """Environments each worker steps (in its own worker processes when > 1)."""
    resources: Dict[str, float] = field(default_factory=dict)
    """What each worker reserves on its node: ``CPU`` (default 1), ``GPU``, custom resources."""
    max_lifetime_restarts: int = 10
    """Restarts of dead workers over the run before it ends with a checkpoint (ML-Agents'
    ``env_settings.max_lifetime_restarts``, which is read into this field)."""
    steps_per_call: int = 1
    """Env steps a worker runs per call. 1: every action taken with the learner's current
    weights, as in the local loop. More: fewer round trips, the next call sent as soon as
    one returns, so workers act with weights up to ``2 * steps_per_call - 1`` steps old."""

    def __post_init__(self) -> None:
        _check_str(self, "address", optional=True)
        _check_int(self, "num_workers", 1)
        if self.num_workers > MAX_RAY_WORKERS:
            raise _InvalidField("num_workers", f"expected at most {MAX_RAY_WORKERS}, got {self.num_workers}")
        _check_int(self, "envs_per_worker", 1)
        if self.num_workers * self.envs_per_worker > MAX_RAY_WORKERS:
            raise _InvalidField(
                "envs_per_worker",
                f"num_workers x envs_per_worker must be at most {MAX_RAY_WORKERS}, got "
                f"{self.num_workers} x {self.envs_per_worker}",
            )
        if not isinstance(self.resources, Mapping) or not all(isinstance(k, str) and k for k in self.resources):
            raise _InvalidField("resources", f"expected a mapping of resource names to amounts, got {_describe(self.resources)}")
        resources: Dict[str, float] = {}
        for key, amount in self.resources.items():
            if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not amount >= 0 or amount == float("inf"):
                raise _InvalidField("resources", f"{key}: expected a number >= 0, got {_describe(amount)}")
            resources[key] = float(amount)
        object.__setattr__(self, "resources", resources)
        _check_int(self, "max_lifetime_restarts", 0)
        _check_int(self, "steps_per_call", 1)
        if self.steps_per_call > 1000:
            raise _InvalidField("steps_per_call", f"expected at most 1000, got {self.steps_per_call}")

    @property
    def num_envs(self) -> int:
        """Environments over every worker."""
        return self.num_workers * self.envs_per_worker


@dataclass(frozen=True)
class EnvSettings:
    """Which environment to run and how many copies (``env_settings:``)."""

    env_path: Optional[str] = None
    """Env id: ``builtin:<Name>``, ``gym:<id>``, or a path to a Unity build; None: the editor."""
    env_args: Dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the environment's constructor."""
    num_envs: int = 1
    """Environment copies stepped in parallel (>= 1)."""
    agents_per_env: int = 1
    """Agents per environment copy, for environments that support several (>= 1)."""
    seed: int = -1
    """Random seed for environments and the trainer; -1: chosen at random."""
    base_port: int = 5005
    """First port for Unity environments (accepted for Unity; unused otherwise)."""
    # --- Unity (issue 12): the other Unity keys live in engine_settings, read by envs/unity.
    timeout_wait: int = 60
    """Seconds every env has to answer each reset and step; a Unity game also to connect."""
    num_areas: int = 1
    """Training areas each Unity build instantiates (sent in the handshake, as ML-Agents does)."""
    ray: Optional[RaySettings] = None
    """Rollout workers on a Ray cluster (`RaySettings`); None: the envs step on this machine."""

    def __post_init__(self) -> None:
        _check_str(self, "env_path", optional=True)
        if not isinstance(self.env_args, Mapping) or not all(
            isinstance(k, str) for k in self.env_args
        ):
            raise _InvalidField("env_args", "expected a mapping with string keys")
        object.__setattr__(self, "env_args", dict(self.env_args))
        _check_int(self, "num_envs", 1)
        _check_int(self, "agents_per_env", 1)
        _check_int(self, "seed", -1)  # -1: one drawn at random (envs.managers.base.resolve_seed)
        _check_int(self, "base_port", 1)
        if self.base_port > 65535:
            raise _InvalidField("base_port", f"expected a port <= 65535, got {self.base_port}")
        _check_int(self, "timeout_wait", 1)
        _check_int(self, "num_areas", 1)
        if self.ray is not None:
            if not isinstance(self.ray, RaySettings):
                raise _InvalidField("ray", f"expected a mapping, got {_describe(self.ray)}")
            if self.num_envs != 1:
                raise _InvalidField(
                    "num_envs",
                    f"{self.num_envs}: with ray the environments are ray.num_workers x ray.envs_per_worker; "
                    "leave num_envs at 1",
                )


@dataclass(frozen=True)
class EngineSettings:
    """A Unity build's engine settings (``engine_settings:``, ML-Agents' keys and the
    command line's --width ... --no-graphics-monitor). None: not given, the build gets
    ML-Agents' training default (`envs.unity.environment.EngineConfig`)."""

    width: Optional[int] = None
    height: Optional[int] = None
    quality_level: Optional[int] = None
    time_scale: Optional[float] = None
    target_frame_rate: Optional[int] = None
    capture_frame_rate: Optional[int] = None
    no_graphics: Optional[bool] = None
    """Every build starts with ``-nographics -batchmode``."""
    no_graphics_monitor: Optional[bool] = None
    """Worker 0 renders, the others start headless (ML-Agents Release 22)."""

    def __post_init__(self) -> None:
        for key in ("width", "height"):
            _check_int(self, key, optional=True)
            value = getattr(self, key)
            if value is not None and value <= 0:
                raise _InvalidField(key, f"expected a size > 0, got {value}")
        for key in ("quality_level", "target_frame_rate", "capture_frame_rate"):
            _check_int(self, key, optional=True)
        _check_number(self, "time_scale", optional=True)
        if self.time_scale is not None:
            object.__setattr__(self, "time_scale", float(self.time_scale))
            if self.time_scale <= 0:
                raise _InvalidField("time_scale", f"expected a number > 0, got {self.time_scale}")
        for key in ("no_graphics", "no_graphics_monitor"):
            if getattr(self, key) is not None:
                _check_bool(self, key)

    def given(self) -> Dict[str, Any]:
        """The keys that were set (what configuration.yaml records), ML-Agents' names."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class CheckpointSettings:
    """Where results go and how an existing run is treated (``checkpoint_settings:``)."""

    run_id: str = "ppo"
    """Name of the run; results go to <results_dir>/<run_id>."""
    results_dir: str = "results"
    """Directory holding every run."""
    resume: bool = False
    """Continue the run from its latest checkpoint (step, schedules, summaries)."""
    force: bool = False
    """Overwrite an existing run of the same run_id."""
    initialize_from: Optional[str] = None
    """run_id of a previous run whose weights initialise every behavior."""
    inference: bool = False
    """Run the policy without training."""

    def __post_init__(self) -> None:
        _check_str(self, "run_id")
        _check_str(self, "results_dir")
        _check_bool(self, "resume")
        _check_bool(self, "force")
        _check_str(self, "initialize_from", optional=True)
        _check_bool(self, "inference")
        if self.resume and self.force:
            raise _InvalidField("force", "cannot be combined with resume; give one of them")


@dataclass(frozen=True)
class DeviceSettings:
    """Devices the towers are placed on (``device_settings:``); both None: the default device."""

    num_gpus: Optional[int] = None
    """Use GPUs 0..num_gpus-1, one tower each (0: CPU only)."""
    devices: Optional[Tuple[str, ...]] = None
    """Explicit tower devices, e.g. ("/cpu:0", "/cpu:1") or ("/gpu:0", "/gpu:1")."""

    def __post_init__(self) -> None:
        _check_int(self, "num_gpus", 0, optional=True)
        if self.devices is not None:
            if isinstance(self.devices, str) or not isinstance(self.devices, (list, tuple)):
                raise _InvalidField(
                    "devices", f"expected a list of device names, got {_describe(self.devices)}"
                )
            object.__setattr__(self, "devices", tuple(self.devices))
            if not self.devices:
                raise _InvalidField("devices", "expected at least one device name")
            for device in self.devices:
                if not isinstance(device, str) or not device.startswith("/"):
                    raise _InvalidField(
                        "devices",
                        f"expected device names such as /gpu:0 or /cpu:1, got {_describe(device)}",
                    )
        if self.num_gpus is not None and self.devices is not None:
            raise _InvalidField("devices", "cannot be combined with num_gpus; give one of them")


@dataclass(frozen=True)
class ClusterSettings:
    """A TensorFlow cluster for the towers (``cluster_settings:``, or ``--cluster=<file>``
    whose top level has the same keys). No chief: towers on local devices."""

    chief: Optional[str] = None
    """host:port of the chief's server (the process that steps the envs and holds the variables)."""
    workers: Tuple[str, ...] = ()
    """host:port of each worker's server (``trainer-learn --worker --task-index=<i>``)."""
    worker_devices: Optional[Tuple[Any, ...]] = None
    """Per worker, its tower devices (e.g. [GPU:0, GPU:1]); None: all its GPUs, else its CPU."""
    startup_timeout: float = 60.0
    """Seconds the chief waits for every worker to answer at start-up."""

    def __post_init__(self) -> None:
        if self.chief is not None:
            _check_address("chief", self.chief)
        if isinstance(self.workers, str) or not isinstance(self.workers, (list, tuple)):
            raise _InvalidField("workers", f"expected a list of host:port, got {_describe(self.workers)}")
        object.__setattr__(self, "workers", tuple(self.workers))
        for address in self.workers:
            _check_address("workers", address)
        if len(set(self.workers) | {self.chief}) != len(self.workers) + 1 and self.chief is not None:
            raise _InvalidField("workers", "every server needs its own host:port (a duplicate was given)")
        if self.chief is None and self.workers:
            raise _InvalidField("chief", "workers are given but no chief host:port")
        if self.chief is not None and not self.workers:
            raise _InvalidField("workers", "expected at least one worker host:port")
        _check_number(self, "startup_timeout", 0.0, low_open=True)
        if self.worker_devices is not None:
            lists = self.worker_devices
            if isinstance(lists, str) or not isinstance(lists, (list, tuple)) or len(lists) != len(self.workers):
                raise _InvalidField(
                    "worker_devices", f"expected one device list per worker ({len(self.workers)} lists)"
                )
            normalized = []
            for i, devices in enumerate(lists):
                if isinstance(devices, str) or not isinstance(devices, (list, tuple)) or not devices:
                    raise _InvalidField("worker_devices", f"worker {i}: expected a list such as [GPU:0, GPU:1]")
                names = [_normalize_device(d) for d in devices]
                for raw, name in zip(devices, names):
                    if name is None:
                        raise _InvalidField(
                            "worker_devices", f"worker {i}: expected device names such as GPU:0 or CPU:1, got {_describe(raw)}"
                        )
                normalized.append(tuple(names))
            object.__setattr__(self, "worker_devices", tuple(normalized))

    @property
    def enabled(self) -> bool:
        return self.chief is not None
