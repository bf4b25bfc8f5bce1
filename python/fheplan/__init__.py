"""fheplan: residency management for FHE values (pageable host, pinned host, CUDA devices).

The names follow the behavioural reference one to one (``residency-lifetimes``). The work is
done by the C core ``fheplan._fheplan`` over libfheplan's public API; this file only adds the
small value types the reference spells as Python classes (actions, reservations, requests,
CKKS metadata and the two enums). ``fheplan-python(7)`` maps every name to its C function.
"""

import enum
from dataclasses import dataclass, field
from typing import Any, Optional, Tuple

from . import _fheplan
from ._fheplan import (  # noqa: F401  (re-exported)
    PAGEABLE_HOST,
    PINNED_HOST,
    DeterministicLookahead,
    DeterministicTieredLRU,
    FieldView,
    LeasedValue,
    Location,
    Program,
    ResidencyBackendError,
    ResidencyBudgetError,
    ResidencyController,
    ResidencyDecision,
    ResidencyError,
    ResidencyHandle,
    ResidencyHandleError,
    ResidencyHold,
    ResidencyInfeasibleError,
    ResidencyLease,
    ResidencyLeaseError,
    ResidencyLocationError,
    ResidencyManager,
    ResidencyMemoryError,
    ResidencyPlan,
    ResidencyPlanExecutionError,
    ResidencyPreserveError,
    ResidencyProtectedError,
    ResidencyReentrancyError,
    ResidencyReplicaError,
    ResidencyScope,
    ResidencyScopeError,
    ResidencySourceError,
    ResidencyStaleStateError,
    ResidencyStateError,
    ResidencyUnsupportedError,
    ResidencyUse,
    ResidencyValueError,
    Runner,
    Stream,
    Value,
    check,
    compile,
    cuda_location,
    min_budget,
    run,
    to,
)

__version__ = _fheplan.__version__


def _check(cls: str, param: str, value: Any, types: Any, accepted: str) -> None:
    """The boundary check of the value types below: TypeError naming the parameter."""
    if not isinstance(value, types) or isinstance(value, bool) and int in (
            types if isinstance(types, tuple) else (types,)):
        raise TypeError(f"{cls}: {param} must be {accepted}, not {type(value).__name__}")


def _check_range(cls: str, param: str, value: int, lo: int, hi: int, text: str) -> None:
    if not lo <= value <= hi:
        raise ResidencyValueError(f"{cls}: {param} must be in {text}, not {value}")


class ReplicaMode(enum.IntEnum):
    """REPLICABLE: several simultaneous copies (ensure); EXCLUSIVE: one (move)."""

    REPLICABLE = _fheplan.REPLICABLE
    EXCLUSIVE = _fheplan.EXCLUSIVE


class Recoverability(enum.IntEnum):
    """MUST_PRESERVE: adopt; RECONSTRUCTIBLE: register_source."""

    MUST_PRESERVE = _fheplan.MUST_PRESERVE
    RECONSTRUCTIBLE = _fheplan.RECONSTRUCTIBLE


@dataclass(frozen=True)
class CKKSMeta:
    """CKKS metadata of a value; no movement ever changes it (fhr_ckks_meta)."""

    context_id: int = 0
    level: int = 0
    scale: float = 0.0
    prime_ids: Tuple[int, ...] = ()
    domain: Optional[str] = None        # "coeff", "eval" or None
    key_relation: Optional[str] = None  # "rotation", "conjugation", "relinearization" or None
    key_param: int = 0

    def __post_init__(self) -> None:
        _check("CKKSMeta", "context_id", self.context_id, int, "an int")
        _check_range("CKKSMeta", "context_id", self.context_id, 0, 2**64 - 1, "0..2**64-1")
        _check("CKKSMeta", "level", self.level, int, "an int")
        _check_range("CKKSMeta", "level", self.level, -2**31, 2**31 - 1, "-2**31..2**31-1")
        _check("CKKSMeta", "scale", self.scale, (int, float), "a float")
        _check("CKKSMeta", "prime_ids", self.prime_ids, (tuple, list), "a tuple of ints")
        for i, p in enumerate(self.prime_ids):
            _check("CKKSMeta", f"prime_ids[{i}]", p, int, "an int")
            _check_range("CKKSMeta", f"prime_ids[{i}]", p, 0, 2**32 - 1, "0..2**32-1")
        _check("CKKSMeta", "key_param", self.key_param, int, "an int")
        _check_range("CKKSMeta", "key_param", self.key_param, -2**63, 2**63 - 1,
                     "-2**63..2**63-1")
        for name in ("domain", "key_relation"):
            _check("CKKSMeta", name, getattr(self, name), (str, int, type(None)),
                   "a str or None")


@dataclass(frozen=True)
class ManagedValue:
    """A value to adopt: field names to arrays (any DLPack producer) and its CKKS metadata."""

    fields: Any
    meta: Optional[CKKSMeta] = None


# ---- actions (fhr_action) ------------------------------------------------------------------


@dataclass(frozen=True)
class EnsureResident:
    """limbs: a cut value's q-limbs the device copy must hold (fhr_ensure_limbs); 0: whole."""

    handle: ResidencyHandle
    at: Location
    limbs: int = 0
    _kind = _fheplan.ACT_ENSURE


@dataclass(frozen=True)
class MoveResident:
    handle: ResidencyHandle
    to: Location
    from_location: Optional[Location] = None
    _kind = _fheplan.ACT_MOVE


@dataclass(frozen=True)
class DropResident:
    """limbs: a drop of parts (fhr_drop_parts): the copy keeps the parts a use of that many
    q-limbs reads; 0: the whole copy goes."""

    handle: ResidencyHandle
    at: Location
    limbs: int = 0
    _kind = _fheplan.ACT_DROP


@dataclass(frozen=True)
class DiscardValue:
    handle: ResidencyHandle
    _kind = _fheplan.ACT_DISCARD


@dataclass(frozen=True)
class MemoryReservation:
    """Headroom charged at a location for a scope's lifetime (fhr_reservation)."""

    at: Location
    nbytes: int
    label: str = ""

    def __post_init__(self) -> None:
        _check("MemoryReservation", "at", self.at, (Location, str), "a Location")
        _check("MemoryReservation", "nbytes", self.nbytes, int, "an int (bytes)")
        _check_range("MemoryReservation", "nbytes", self.nbytes, 0, 2**64 - 1,
                     "0..2**64-1 (bytes)")
        _check("MemoryReservation", "label", self.label, (str, type(None)), "a str")


# ---- requests (fhr_request) -----------------------------------------------------------------


@dataclass(frozen=True)
class ResidencyRequirement:
    """An exact (handle, location) endpoint that must hold when the use begins; limbs: the
    q-limbs a device copy of a cut value must hold (a plan's level L is L + 1; 0: whole)."""

    handle: ResidencyHandle
    at: Location
    limbs: int = 0

    def __post_init__(self) -> None:
        _check("ResidencyRequirement", "handle", self.handle, ResidencyHandle,
               "a ResidencyHandle")
        _check("ResidencyRequirement", "at", self.at, (Location, str), "a Location")
        _check("ResidencyRequirement", "limbs", self.limbs, int, "an int (q-limbs)")
        _check_range("ResidencyRequirement", "limbs", self.limbs, 0, 2**32 - 1, "0..2**32-1")


@dataclass(frozen=True)
class ResidencyRequest:
    name: str = ""
    requirements: Tuple[ResidencyRequirement, ...] = ()
    reservations: Tuple[MemoryReservation, ...] = ()
    position: int = 0  # where it stands in a known future (DeterministicLookahead); 0: unknown

    def __post_init__(self) -> None:
        _check("ResidencyRequest", "name", self.name, (str, type(None)), "a str")
        _check("ResidencyRequest", "requirements", self.requirements, (tuple, list),
               "a tuple of ResidencyRequirement")
        for i, r in enumerate(self.requirements):
            _check("ResidencyRequest", f"requirements[{i}]", r, ResidencyRequirement,
                   "a ResidencyRequirement(handle, at)")
        _check("ResidencyRequest", "reservations", self.reservations, (tuple, list),
               "a tuple of MemoryReservation")
        for i, r in enumerate(self.reservations):
            _check("ResidencyRequest", f"reservations[{i}]", r, MemoryReservation,
                   "a MemoryReservation")
        _check("ResidencyRequest", "position", self.position, int, "an int")
        _check_range("ResidencyRequest", "position", self.position, 0, 2**64 - 1,
                     "0..2**64-1")


def lookahead_future(requests):
    """The future of DeterministicLookahead from requests in execution order (1-based), with
    each requirement's limbs (a cut value's q-limbs; 0: whole)."""
    return tuple(
        (i, r.handle, r.at, r.limbs) for i, req in enumerate(requests, 1)
        for r in req.requirements
    )


_fheplan._set_types(
    meta=CKKSMeta,
    ensure=EnsureResident,
    move=MoveResident,
    drop=DropResident,
    discard=DiscardValue,
    reservation=MemoryReservation,
)

__all__ = [n for n in dir() if not n.startswith("_") and n not in ("enum", "dataclass", "field")]
