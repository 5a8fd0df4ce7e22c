"""Self-play (``self_play:``): ML-Agents' ghost trainer and ghost controller, in the loop.

ML-Agents Release 22 (``ml-agents/mlagents/trainers/ghost/trainer.py`` and
``controller.py``, commit ac576f9f), with its code's defaults (`SelfPlaySettings`):

* **Teams** are the environment's behavior ids ``Name?team=N`` (`envs.base_env.BehaviorId`).
  One `GhostController` per run keeps the team ids in the order they are first seen; the
  first one learns first. Every ``team_change`` trainer steps of the learning behavior the
  learning team goes to the back of the queue and the next team learns.
* **Symmetric** games (one behavior, several teams: ``Tennis?team=0``, ``Tennis?team=1``):
  one trainer; its learning team acts through the trainer's actor, every other team through
  the behavior's ghost (`trainers.ghost_actor.GhostActor`), one inference call each.
  **Asymmetric** games (``Striker?team=0`` vs ``Goalie?team=1``): one trainer per behavior;
  the behavior whose team learns acts through its actor, the other plays its own snapshots.
* **Steps**: a self-play trainer's ``step`` counts the learning team's agent steps only (its
  trajectories are the ones it trains on); the ghost teams' agent steps are ``ghost_step``.
  Only the learning team's trajectories are assembled and trained on; the other teams'
  agents are tracked for their episode returns only (``Environment/Cumulative Reward``
  counts every team's episodes, as in ML-Agents) and their trajectories are never built.
* **Snapshots**: every ``save_steps`` trainer steps the current actor's weights (with the
  normalizers' statistics) go into a ring of ``window`` snapshots, each with the current ELO.
  At start the initial weights are snapshot 0, and the ghost plays them.
* **Swaps**: every ``swap_steps`` ghost steps, and whenever the learning team changes, the
  ghost gets a new opponent: with probability ``play_against_latest_model_ratio`` the
  current weights, else a snapshot drawn uniformly from the window. A swap is a weight
  assignment into the ghost's copy of the actor (`GhostActor.load_weights`), never a rebuild.
* **ELO**: each of the learning team's trajectories that ends an episode (done, not
  interrupted) is a game; its last reward decides it: > 0 win (1), < 0 loss (0), 0 draw
  (0.5). With the opponent's rating ``R2`` (the snapshot it plays, or the current rating
  against the latest weights), ``E = 1 / (1 + 10^((R2 - R1) / 400))`` and the change
  ``result - E`` (ML-Agents' code has no K factor: at most one point per game) is added to
  the learning policy's rating and taken from the opponent's. Written as ``Self-play/ELO``.

Differences from ML-Agents (each noted where it is done):

* A team change does not reset the environment (ML-Agents resets it and ends every
  episode): every self-play behavior's agents start new trajectories instead (their partial
  ones are dropped, unsent, as ML-Agents' reset drops them) and their memories restart from
  zeros; games already under way go on, and the one that ends first is credited to the new
  learning team. So no env reset competes with other uses of resets, and no step is lost.
* All the ghost teams of one behavior play the same snapshot (ML-Agents draws one per team;
  the same with two teams, the only case its example games have).
* The draws come from a seeded generator (ML-Agents: numpy's global one), saved with the rest.
* Snapshots, ratings, counters, the learning team and the ghost's current opponent are
  saved with every checkpoint (``checkpoint-<step>.self_play.npz`` beside it, deleted with
  it) and restored by ``--resume`` (ML-Agents keeps only the rating, in
  ``training_status.json``, which we also write as ``elo``).
"""
from __future__ import annotations

import json
import os
import time
import zlib
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Deque, Dict, Hashable, List, Mapping, Optional, Protocol, Sequence, Tuple

import numpy as np

from envs.base_env import BehaviorId, BehaviorSpec
from trainers.config import SelfPlaySettings
from trainers.exceptions import CheckpointError
from trainers.loop.status import TrainingStatus
from trainers.loop.trajectory import AgentProcessor, Trajectory
from trainers.stats import StatsReporter

if TYPE_CHECKING:  # annotations only: trainers.policy imports TensorFlow, which this module does not
    from trainers.policy import ActionInfo, Actor

#: What `SelfPlay.save` writes beside a checkpoint prefix.
STATE_SUFFIX = ".self_play.npz"
ELO_TAG = "Self-play/ELO"
_FORMAT = 1

Weights = List[np.ndarray]


class Ghost(Protocol):
    """An `trainers.policy.Actor` whose weights are snapshots (`trainers.ghost_actor.GhostActor`)."""

    @property
    def use_recurrent(self) -> bool:
        """Whether it keeps a memory per agent."""

    def act(
        self,
        obs: Sequence[np.ndarray],
        action_masks: Optional[np.ndarray] = None,
        deterministic: bool = False,
        agent_keys: Optional[Sequence[Hashable]] = None,
    ) -> "ActionInfo":
        """As `trainers.policy.Actor.act`."""

    def forget_agents(self, keys: Sequence[Hashable]) -> None:
        """As `trainers.policy.Actor.forget_agents`."""

    def sync_acting_weights(self) -> None:
        """A no-op for a ghost."""

    def close(self) -> None:
        """A no-op for a ghost (the trainer owns its session)."""

    def get_weights(self) -> Weights:
        """The policy's current actor as a snapshot."""

    def load_weights(self, weights: Sequence[np.ndarray]) -> None:
        """Plays ``weights`` from now on."""

    def current_weights(self) -> Weights:
        """What it plays now."""


@dataclass(frozen=True)
class ActingGroup:
    """Environment ids of one behavior that act through one actor in one inference call."""

    ids: Tuple[str, ...]
    actor: Actor
    processor: AgentProcessor
    learning: bool  # their trajectories train and their steps count as the trainer's


@dataclass(frozen=True)
class SelfPlayBehavior:
    """What the controller hands over of one behavior with ``self_play``."""

    name: str
    settings: SelfPlaySettings
    ids: Tuple[str, ...]  # the environment's ids of the behavior, in its order
    actor: Actor  # the trainer's
    ghost: Ghost
    processor: AgentProcessor  # the trainer's (the learning team's trajectories)
    spec: BehaviorSpec
    time_horizon: int
    stats: StatsReporter
    max_steps: int


def game_result(final_reward: float) -> float:
    """ML-Agents' rule: the last reward's sign decides (win 1, loss 0, draw 0.5)."""
    return 1.0 if final_reward > 0 else 0.0 if final_reward < 0 else 0.5


def elo_change(rating: float, opponent: float, result: float) -> float:
    """``result - E`` with ``E = 10^(R1/400) / (10^(R1/400) + 10^(R2/400))`` (ML-Agents'
    ``compute_elo_rating_changes``, K factor 1)."""
    r1 = 10.0 ** (rating / 400.0)
    r2 = 10.0 ** (opponent / 400.0)
    return result - r1 / (r1 + r2)


class GhostController:
    """ML-Agents' ``GhostController``: the queue of teams, the learning team, ELO changes."""

    def __init__(self, maxlen: int = 10) -> None:
        self.queue: Deque[int] = deque(maxlen=maxlen)
        self.learning_team = -1
        self._ghosts: Dict[int, "BehaviorGhost"] = {}  # team -> the first behavior seen with it
        self.changed = False  # the learning team changed since `take_change`

    def subscribe(self, team: int, ghost: "BehaviorGhost") -> None:
        if team not in self._ghosts:
            self._ghosts[team] = ghost
            if self.learning_team < 0:
                self.learning_team = team
            else:
                self.queue.append(team)

    def change_training_team(self) -> None:
        """The learning team goes to the back of the queue; the next one learns."""
        if not self.queue:
            return  # one team only: it keeps learning
        self.queue.append(self.learning_team)
        self.learning_team = self.queue.popleft()
        self.changed = True

    def take_change(self) -> bool:
        changed, self.changed = self.changed, False
        return changed

    def compute_elo_change(self, rating: float, result: float) -> float:
        """The learning team's rating change for ``result``; the opponent's (every other
        team's behavior's current opponent, as ML-Agents) loses as much."""
        opponent = 0.0
        for team, ghost in self._ghosts.items():
            if team != self.learning_team:
                opponent = ghost.opponent_elo
        change = elo_change(rating, opponent, result)
        for team, ghost in self._ghosts.items():
            if team != self.learning_team:
                ghost.policy_elos[ghost.current_opponent] -= change
        return change

    def state(self) -> Dict[str, Any]:
        return {"learning_team": self.learning_team, "queue": list(self.queue)}

    def restore(self, state: Mapping[str, Any]) -> None:
        teams = set(self._ghosts)
        queue = [int(t) for t in state.get("queue", []) if int(t) in teams]
        learning = int(state.get("learning_team", self.learning_team))
        if learning in teams and set(queue) | {learning} == teams:  # the same teams as before
            self.learning_team = learning
            self.queue.clear()
            self.queue.extend(queue)


class BehaviorGhost:
    """ML-Agents' ``GhostTrainer`` for one behavior: snapshots, swaps, ratings, steps."""

    def __init__(self, behavior: SelfPlayBehavior, controller: GhostController, seed: int, initial_elo: float) -> None:
        s = behavior.settings
        self.behavior = behavior
        self.name = behavior.name
        self.settings = s
        # Resolved by SelfPlaySettings (5 x save_steps when not given).
        self.team_change = int(s.team_change) if s.team_change is not None else 5 * s.save_steps
        self.controller = controller
        self.teams = {bid: BehaviorId.parse(bid).team for bid in behavior.ids}
        self.ghost = behavior.ghost
        self.ghost_processor = AgentProcessor(behavior.spec, behavior.time_horizon, record=False)
        self.rng = np.random.default_rng(seed)
        self.ghost_step = 0
        self.last_save = self.last_swap = self.last_team_change = 0
        self.snapshots: List[Weights] = []
        self.policy_elos = [float(initial_elo)] * (s.window + 1)  # the last: the learning policy's
        self.snapshot_counter = 0
        self.current_opponent = 0  # index into snapshots; -1: the latest weights
        self.learning_team = -1  # the learning team as this behavior last saw it
        self._groups: Optional[List[ActingGroup]] = None
        for team in dict.fromkeys(self.teams.values()):
            controller.subscribe(team, self)

    # ----------------------------------------------------------------- ratings

    @property
    def current_elo(self) -> float:
        return self.policy_elos[-1]

    @property
    def opponent_elo(self) -> float:
        return self.policy_elos[self.current_opponent]

    def record_game(self, final_reward: float) -> float:
        """A game of the learning team ended with ``final_reward``: updates the ratings and
        writes ``Self-play/ELO``; returns the change."""
        change = self.controller.compute_elo_change(self.current_elo, game_result(final_reward))
        self.policy_elos[-1] += change
        self.behavior.stats.add_stat(ELO_TAG, self.current_elo)
        return change

    # ----------------------------------------------------------------- acting

    @property
    def is_learning(self) -> bool:
        """Whether one of this behavior's teams learns now."""
        return self.controller.learning_team in self.teams.values()

    def groups(self) -> List[ActingGroup]:
        """The learning team's ids (the trainer's actor), then the others' (the ghost)."""
        if self._groups is None:
            team = self.controller.learning_team
            learning = tuple(i for i in self.behavior.ids if self.teams[i] == team)
            ghosts = tuple(i for i in self.behavior.ids if self.teams[i] != team)
            self._groups = []
            if learning:
                self._groups.append(ActingGroup(learning, self.behavior.actor, self.behavior.processor, True))
            if ghosts:
                self._groups.append(ActingGroup(ghosts, self.ghost, self.ghost_processor, False))
        return self._groups

    def restart_agents(self) -> None:
        """After a team change: every agent starts a new trajectory and a new memory (see
        the module docstring) and the acting groups follow the new learning team."""
        keys: List[Hashable] = list(self.behavior.processor.agent_keys) + list(self.ghost_processor.agent_keys)
        if self.behavior.actor.use_recurrent and keys:
            self.behavior.actor.forget_agents(keys)
            self.ghost.forget_agents(keys)
        self.behavior.processor.end_episodes()
        self.ghost_processor.end_episodes()
        self._groups = None

    # ----------------------------------------------------------------- ML-Agents' advance

    def advance(self, step: int) -> None:
        """After the trainer's update at ``step`` (ML-Agents' ``GhostTrainer.advance``): team
        change, snapshot, swap."""
        s = self.settings
        if step - self.last_team_change > self.team_change:
            self.controller.change_training_team()
            self.last_team_change = step
        if step - self.last_save > s.save_steps:
            self.save_snapshot()
            self.last_save = step
        next_team = self.controller.learning_team
        if self.learning_team != next_team or self.ghost_step - self.last_swap > s.swap_steps:
            self.learning_team = next_team
            self.swap_snapshots()
            self.last_swap = self.ghost_step

    def save_snapshot(self) -> None:
        """The current weights into the ring at ``snapshot_counter``, with the current rating."""
        weights = self.ghost.get_weights()
        if self.snapshot_counter < len(self.snapshots):
            self.snapshots[self.snapshot_counter] = weights
        else:
            self.snapshots.append(weights)
        self.policy_elos[self.snapshot_counter] = self.current_elo
        self.snapshot_counter = (self.snapshot_counter + 1) % self.settings.window

    def swap_snapshots(self) -> None:
        """A new opponent for the ghost teams (none when every team of the behavior learns)."""
        if not any(t != self.controller.learning_team for t in self.teams.values()):
            return
        if self.rng.uniform() < 1.0 - self.settings.play_against_latest_model_ratio:
            self.current_opponent = int(self.rng.integers(len(self.snapshots)))
            weights = self.snapshots[self.current_opponent]
        else:
            self.current_opponent = -1
            weights = self.ghost.get_weights()
        self.ghost.load_weights(weights)

    # ----------------------------------------------------------------- persistence

    def state(self) -> Dict[str, Any]:
        return {
            "format": _FORMAT,
            "policy_elos": self.policy_elos,
            "snapshot_counter": self.snapshot_counter,
            "snapshots": len(self.snapshots),
            "current_opponent": self.current_opponent,
            "ghost_step": self.ghost_step,
            "last_save": self.last_save,
            "last_swap": self.last_swap,
            "last_team_change": self.last_team_change,
            "learning_team": self.learning_team,
            "controller": self.controller.state(),
            "rng": self.rng.bit_generator.state,
            "variables": list(getattr(self.ghost, "variable_names", [])),
            "saved_at": time.time(),
        }

    def save(self, path: str) -> None:
        """Writes the state, the snapshots and the ghost's current weights (atomically)."""
        arrays: Dict[str, np.ndarray] = {"state": np.array(json.dumps(self.state()))}
        for k, weights in enumerate(self.snapshots):
            for j, w in enumerate(weights):
                arrays[f"snapshot_{k}_{j}"] = w
        for j, w in enumerate(self.ghost.current_weights()):
            arrays[f"ghost_{j}"] = w
        temporary = path + ".tmp.npz"
        np.savez(temporary, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle
        os.replace(temporary, path)

    def load(self, path: str) -> Dict[str, Any]:
        """Restores what `save` wrote (a window changed since is applied); returns the state."""
        try:
            with np.load(path, allow_pickle=False) as data:
                state = json.loads(str(data["state"]))
                names = list(getattr(self.ghost, "variable_names", []))
                if state.get("format") != _FORMAT or (names and state.get("variables") != names):
                    raise ValueError("written for another actor or format")
                n = len(state["variables"])
                snapshots = [[data[f"snapshot_{k}_{j}"] for j in range(n)] for k in range(int(state["snapshots"]))]
                current = [data[f"ghost_{j}"] for j in range(n)]
        except (OSError, KeyError, ValueError, TypeError) as exc:
            raise CheckpointError(f"{path}: cannot restore the self-play state ({exc})") from None
        window = self.settings.window
        elos = [float(e) for e in state["policy_elos"]]
        kept = min(len(snapshots), window)
        self.snapshots = snapshots[:kept]
        ring = elos[:-1][:window] + [self.settings.initial_elo] * max(0, window - (len(elos) - 1))
        self.policy_elos = ring + [elos[-1]]
        self.snapshot_counter = int(state["snapshot_counter"]) % window if kept == len(snapshots) else 0
        opponent = int(state["current_opponent"])
        self.current_opponent = opponent if opponent < kept else -1
        self.ghost_step = int(state["ghost_step"])
        self.last_save = int(state["last_save"])
        self.last_swap = int(state["last_swap"])
        self.last_team_change = int(state["last_team_change"])
        self.learning_team = int(state["learning_team"])
        self.rng.bit_generator.state = state["rng"]
        self.ghost.load_weights(current)
        return state


class SelfPlay:
    """The controller's view of self-play: acting groups, steps, games, advance, save."""

    def __init__(
        self,
        behaviors: Sequence[SelfPlayBehavior],
        seed: int,
        status: Optional[TrainingStatus] = None,
        checkpoint_prefixes: Optional[Mapping[str, str]] = None,
    ) -> None:
        """``status`` and ``checkpoint_prefixes`` (behavior -> the checkpoint it resumed from):
        a resumed run restores each behavior's state saved beside its checkpoint, or else
        starts from the rating the status recorded."""
        self.controller = GhostController()
        self.ghosts: Dict[str, BehaviorGhost] = {}
        prefixes = checkpoint_prefixes or {}
        for b in behaviors:
            recorded = status.get_elo(b.name) if status is not None else None
            initial = recorded if recorded is not None else b.settings.initial_elo
            seed_b = np.random.SeedSequence([seed & 0xFFFFFFFF, zlib.crc32(b.name.encode())])
            self.ghosts[b.name] = BehaviorGhost(b, self.controller, int(seed_b.generate_state(1)[0]), initial)
        restored: List[Dict[str, Any]] = []
        for b in behaviors:
            ghost = self.ghosts[b.name]
            b.actor.sync_acting_weights()  # threaded: the acting copy is what snapshots read
            path = prefixes.get(b.name, "") + STATE_SUFFIX
            if b.name in prefixes and os.path.isfile(path):
                restored.append(ghost.load(path))
            else:  # ML-Agents: the initial weights are snapshot 0, and the ghost plays them
                ghost.save_snapshot()
                ghost.ghost.load_weights(ghost.snapshots[0])
                ghost.learning_team = self.controller.learning_team
        if restored:  # the controller as the most recent save left it
            self.controller.restore(max(restored, key=lambda s: float(s.get("saved_at", 0.0)))["controller"])
            for ghost in self.ghosts.values():
                ghost._groups = None
        for ghost in self.ghosts.values():
            if ghost.team_change > ghost.behavior.max_steps and len(self.ghosts) > 1:
                print(
                    f"[WARNING] {ghost.name}: self_play.team_change ({ghost.team_change}) exceeds "
                    f"max_steps ({ghost.behavior.max_steps}); the other behavior's teams will not face a trained "
                    "opponent (as ML-Agents warns)",
                    flush=True,
                )

    def __contains__(self, name: object) -> bool:
        return name in self.ghosts

    def groups(self, name: str) -> List[ActingGroup]:
        """How behavior ``name``'s ids act this step (see `ActingGroup`)."""
        return self.ghosts[name].groups()

    def learning_team(self) -> int:
        return self.controller.learning_team

    def on_trajectory(self, name: str, traj: Trajectory) -> None:
        """A learning trajectory: an ended episode is a game (ML-Agents' ``_process_trajectory``)."""
        if traj.done and not traj.interrupted:
            self.ghosts[name].record_game(float(traj.rewards[-1]))

    def add_ghost_steps(self, name: str, steps: int) -> None:
        self.ghosts[name].ghost_step += steps

    def advance(self, name: str, step: int) -> None:
        """After behavior ``name``'s update at ``step``: team change, snapshot, swap; a team
        change restarts every self-play behavior's agents (see the module docstring)."""
        self.ghosts[name].advance(step)
        if self.controller.take_change():
            for ghost in self.ghosts.values():
                ghost.restart_agents()

    def save(self, name: str, prefix: str, status: TrainingStatus) -> None:
        """Beside the checkpoint ``prefix``: the behavior's self-play state; the rating into
        ``status`` (written by the caller)."""
        ghost = self.ghosts[name]
        ghost.save(prefix + STATE_SUFFIX)
        status.set_elo(name, ghost.current_elo)

    def elo(self, name: str) -> float:
        return self.ghosts[name].current_elo
