# Types of the fheplan package (python/fheplan/__init__.py over the C core _fheplan).
import enum
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Optional, Tuple

from . import _fheplan as _fheplan
from ._fheplan import (
    PAGEABLE_HOST as PAGEABLE_HOST,
    PINNED_HOST as PINNED_HOST,
    DeterministicLookahead as DeterministicLookahead,
    DeterministicTieredLRU as DeterministicTieredLRU,
    FieldView as FieldView,
    LeasedValue as LeasedValue,
    Location as Location,
    Program as Program,
    ResidencyBackendError as ResidencyBackendError,
    ResidencyBudgetError as ResidencyBudgetError,
    ResidencyController as ResidencyController,
    ResidencyDecision as ResidencyDecision,
    ResidencyError as ResidencyError,
    ResidencyHandle as ResidencyHandle,
    ResidencyHandleError as ResidencyHandleError,
    ResidencyHold as ResidencyHold,
    ResidencyInfeasibleError as ResidencyInfeasibleError,
    ResidencyLease as ResidencyLease,
    ResidencyLeaseError as ResidencyLeaseError,
    ResidencyLocationError as ResidencyLocationError,
    ResidencyManager as ResidencyManager,
    ResidencyMemoryError as ResidencyMemoryError,
    ResidencyPlan as ResidencyPlan,
    ResidencyPlanExecutionError as ResidencyPlanExecutionError,
    ResidencyPreserveError as ResidencyPreserveError,
    ResidencyProtectedError as ResidencyProtectedError,
    ResidencyReentrancyError as ResidencyReentrancyError,
    ResidencyReplicaError as ResidencyReplicaError,
    ResidencyScope as ResidencyScope,
    ResidencyScopeError as ResidencyScopeError,
    ResidencySourceError as ResidencySourceError,
    ResidencyStaleStateError as ResidencyStaleStateError,
    ResidencyStateError as ResidencyStateError,
    ResidencyUnsupportedError as ResidencyUnsupportedError,
    ResidencyUse as ResidencyUse,
    ResidencyValueError as ResidencyValueError,
    Runner as Runner,
    Stream as Stream,
    Value as Value,
    check as check,
    compile as compile,
    cuda_location as cuda_location,
    min_budget as min_budget,
    run as run,
    to as to,
)

__version__: str
__all__: list[str]


class ReplicaMode(enum.IntEnum):
    REPLICABLE = ...
    EXCLUSIVE = ...


class Recoverability(enum.IntEnum):
    MUST_PRESERVE = ...
    RECONSTRUCTIBLE = ...


@dataclass(frozen=True)
class CKKSMeta:
    context_id: int = 0
    level: int = 0
    scale: float = 0.0
    prime_ids: Tuple[int, ...] = ()
    domain: Optional[str] = None
    key_relation: Optional[str] = None
    key_param: int = 0


@dataclass(frozen=True)
class ManagedValue:
    fields: Any
    meta: Optional[CKKSMeta] = None


@dataclass(frozen=True)
class EnsureResident:
    handle: ResidencyHandle
    at: Location
    limbs: int = 0
    _kind: ClassVar[int]


@dataclass(frozen=True)
class MoveResident:
    handle: ResidencyHandle
    to: Location
    from_location: Optional[Location] = None
    _kind: ClassVar[int]


@dataclass(frozen=True)
class DropResident:
    handle: ResidencyHandle
    at: Location
    limbs: int = 0
    _kind: ClassVar[int]


@dataclass(frozen=True)
class DiscardValue:
    handle: ResidencyHandle
    _kind: ClassVar[int]


@dataclass(frozen=True)
class MemoryReservation:
    at: Location
    nbytes: int
    label: str = ""


@dataclass(frozen=True)
class ResidencyRequirement:
    handle: ResidencyHandle
    at: Location
    limbs: int = 0


@dataclass(frozen=True)
class ResidencyRequest:
    name: str = ""
    requirements: Tuple[ResidencyRequirement, ...] = ()
    reservations: Tuple[MemoryReservation, ...] = ()
    position: int = 0


def lookahead_future(requests: Iterable[ResidencyRequest]
                     ) -> Tuple[Tuple[int, ResidencyHandle, Location, int], ...]: ...
