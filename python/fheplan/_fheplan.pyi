# Types of fheplan._fheplan, the C core (python/src/*.c). The records that calls return
# (snapshots, explanations, a kernel call, a loader's record) are types.SimpleNamespace at
# run time; the classes named _...Record here describe their attributes for type checkers
# only and do not exist in the module.
import os
from types import TracebackType
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Protocol, Sequence, Tuple, Type, Union)

from . import (CKKSMeta, DiscardValue, DropResident, EnsureResident, MemoryReservation,
               MoveResident, ResidencyRequest)

__version__: str
PAGEABLE_HOST: Location
PINNED_HOST: Location
REPLICABLE: int
EXCLUSIVE: int
MUST_PRESERVE: int
RECONSTRUCTIBLE: int
ACT_ENSURE: int
ACT_MOVE: int
ACT_DROP: int
ACT_DISCARD: int

_Action = Union[EnsureResident, MoveResident, DropResident, DiscardValue]
_Loc = Union[Location, str]
_Report = Dict[str, Any]


class _HasCudaStream(Protocol):
    @property
    def cuda_stream(self) -> int: ...


class _HasPtr(Protocol):
    @property
    def ptr(self) -> int: ...


# A stream: an int (the native handle), torch's (.cuda_stream), CuPy's or fheplan's (.ptr).
_StreamLike = Union[int, _HasCudaStream, _HasPtr]
_Streams = Mapping[_Loc, _StreamLike]
_Budgets = Mapping[_Loc, int]


class Location:
    def __new__(cls, text: _Loc) -> Location: ...
    @property
    def kind(self) -> str: ...
    @property
    def index(self) -> int: ...
    def __hash__(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...
    def __reduce__(self) -> Tuple[Any, ...]: ...


class ResidencyHandle:
    @property
    def serial(self) -> int: ...
    @property
    def manager_id(self) -> int: ...
    def __hash__(self) -> int: ...
    def __eq__(self, value: object, /) -> bool: ...
    def __ne__(self, value: object, /) -> bool: ...


class Stream:
    @property
    def ptr(self) -> int: ...
    @property
    def cuda_stream(self) -> int: ...
    @property
    def location(self) -> Location: ...
    def synchronize(self) -> None: ...


class FieldView:
    """One field of a borrowed value, exported without a copy."""
    def __dlpack__(self, *, stream: Optional[_StreamLike] = None, max_version: Any = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    @property
    def __cuda_array_interface__(self) -> Dict[str, Any]: ...
    @property
    def __array_interface__(self) -> Dict[str, Any]: ...
    @property
    def ptr(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def shape(self) -> Tuple[int, ...]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def location(self) -> Location: ...


class LeasedValue:
    """A borrowed concrete value: a read-only mapping of field names to views."""
    def keys(self) -> List[str]: ...
    def items(self) -> List[Tuple[str, FieldView]]: ...
    def __getitem__(self, key: str, /) -> FieldView: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[str]: ...
    def __dlpack__(self, *, stream: Optional[_StreamLike] = None, max_version: Any = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    @property
    def meta(self) -> CKKSMeta: ...
    @property
    def location(self) -> Location: ...
    @property
    def nbytes(self) -> Dict[str, int]: ...


class Value:
    """An application-owned concrete value (what fheplan.to returns); adopt() takes it."""
    def keys(self) -> List[str]: ...
    def items(self) -> List[Tuple[str, FieldView]]: ...
    def __getitem__(self, key: str, /) -> FieldView: ...
    def __len__(self) -> int: ...
    def __dlpack__(self, *, stream: Optional[_StreamLike] = None, max_version: Any = None,
                   dl_device: Any = None, copy: Optional[bool] = None) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    @property
    def meta(self) -> CKKSMeta: ...
    @property
    def location(self) -> Location: ...


class ResidencyLease:
    def release(self) -> None: ...
    def add_consumer_stream(self, stream: _StreamLike, /) -> None: ...
    def __getitem__(self, key: ResidencyHandle, /) -> LeasedValue: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[ResidencyHandle]: ...
    def __enter__(self) -> ResidencyLease: ...
    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc_value: Optional[BaseException], traceback: Optional[TracebackType], /
                 ) -> bool: ...
    @property
    def released(self) -> bool: ...
    @property
    def location(self) -> Location: ...
    @property
    def handles(self) -> Tuple[ResidencyHandle, ...]: ...


class ResidencyHold:
    def release(self) -> None: ...
    def __enter__(self) -> ResidencyHold: ...
    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc_value: Optional[BaseException], traceback: Optional[TracebackType], /
                 ) -> bool: ...
    @property
    def released(self) -> bool: ...


class ResidencyPlan:
    def __init__(self, name: str = "", reclaim: Sequence[_Action] = (),
                 enter: Sequence[_Action] = (), exit: Sequence[_Action] = (),
                 reservations: Sequence[MemoryReservation] = ()) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def reclaim(self) -> Tuple[_Action, ...]: ...
    @property
    def enter(self) -> Tuple[_Action, ...]: ...
    @property
    def exit(self) -> Tuple[_Action, ...]: ...
    @property
    def reservations(self) -> Tuple[MemoryReservation, ...]: ...


class ResidencyScope:
    def __enter__(self) -> ResidencyScope: ...
    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc_value: Optional[BaseException], traceback: Optional[TracebackType], /
                 ) -> bool: ...
    def close(self) -> None: ...
    # report and exit_error are None until the exit (Any: callers index them after it)
    @property
    def report(self) -> Any: ...
    @property
    def exit_error(self) -> Any: ...
    @property
    def plan(self) -> ResidencyPlan: ...
    @property
    def path(self) -> str: ...
    @property
    def entered(self) -> bool: ...
    @property
    def closed(self) -> bool: ...


# ---- records (types.SimpleNamespace at run time) -------------------------------------------

class _ObservationRecord:
    device_free_bytes: int
    device_total_bytes: int
    pool_used_bytes: int
    pool_reserved_bytes: int
    pool_used_high_bytes: int
    pool_reserved_high_bytes: int
    pool_granule_bytes: int
    nvml_used_bytes: Optional[int]
    nvml_total_bytes: Optional[int]


class _LocationRecord:
    location: Location
    used_bytes: int
    reserved_bytes: int
    inflight_bytes: int
    temporary_bytes: int
    peak_used_bytes: int
    peak_charged_bytes: int
    budget_bytes: Optional[int]
    remaining_budget_bytes: Optional[int]
    observation: Any                # an _ObservationRecord, None where none is taken


class _MaterializationRecord:
    location: Location
    storage_nbytes: int
    charged_nbytes: int
    restore_nbytes: int
    ready: bool
    leases: int
    holds: int
    pending_events: int
    last_use: int
    restore_s: float
    copied_from: Optional[Location]
    limbs: int                      # a partial copy of a cut value: its q-limbs; 0: whole
    parts: int                      # a cut value's copy laid out by parts: the parts it holds


class _CutRecord:
    """A value's limb cut (cut_limbs; fhr_value_info.cut_*)."""
    q: int
    special: int
    parts: int
    alpha: int
    nfields: int
    limb_nbytes: int
    regen_fields: int


class _ValueRecord:
    handle: ResidencyHandle
    label: str
    replica_mode: int
    recoverability: int
    priority: int
    storage_nbytes: int
    logical_nbytes: int
    regen_nbytes: int
    meta: Optional[CKKSMeta]
    materializations: Dict[Location, _MaterializationRecord]
    cut: Optional[_CutRecord]       # None: not cut into limbs


class _SnapshotRecord:
    manager_id: int
    state_version: int
    clock: int
    locations: Dict[Location, _LocationRecord]
    values: Dict[ResidencyHandle, _ValueRecord]


class _PeakRecord:
    peak_used_bytes: int
    peak_charged_bytes: int
    budget_bytes: Optional[int]


class _ExplanationRecord:
    feasible: bool
    reason: str
    status: str
    phase: str
    action_index: int
    handle: Optional[ResidencyHandle]
    location: Optional[Location]
    bytes_short: int
    peaks: Dict[Location, _PeakRecord]
    predicted_peak_bytes: Dict[Location, int]
    bytes_moved: int
    bytes_regenerated: int
    bytes_peer: int
    state_version: int


class _EvictionRecord:
    action: _Action
    priority: int
    last_use: int
    nbytes: int


class _ProtectedRecord:
    handle: ResidencyHandle
    at: Location
    nbytes: int
    reasons: Tuple[str, ...]


class _KernelCallRecord:
    """What a Python kernel is called with (fheplan.run(kernels=...))."""
    name: str
    location: Location
    stream: Stream
    values: List[LeasedValue]
    args: List[Any]          # a LeasedValue for a value argument, an int for an immediate
    device_memory: bool
    line: int
    col: int


class _LoadRecord:
    """What a Python loader is called with (fheplan.run(loaders=...))."""
    loader: str
    arg: int
    value: str
    nbytes: int
    location: Location
    device_memory: bool
    stream: Optional[Stream]
    data: Optional[LeasedValue]  # None in the size probe


class _MinBudgetRecord:
    """What fheplan.min_budget returns (fheplan-python(7) MINIMUM BUDGET)."""
    location: Location
    found: bool
    unused: bool
    exact: bool
    monotonic: bool
    threshold: int
    feasible: int
    near: int
    peak: int
    probes: int
    intervals: List[Tuple[int, Optional[int]]]
    intervals_found: int
    unbounded_s: float
    threshold_s: float
    feasible_s: float
    near_s: float
    reason: str


_Kernel = Callable[[_KernelCallRecord], object]
_Loader = Callable[[_LoadRecord], Optional[int]]


# ---- the manager ----------------------------------------------------------------------------

class ResidencyManager:
    def __init__(self, budgets: Optional[_Budgets] = None, *, device: Optional[str] = None,
                 trace_capacity: int = 4096) -> None: ...
    @property
    def manager_id(self) -> int: ...
    @property
    def backend(self) -> str: ...
    def adopt(self, value: Any, at: Optional[_Loc] = None, replica_mode: Optional[int] = None, *,
              meta: Optional[CKKSMeta] = None, label: Optional[str] = None,
              priority: int = 0) -> ResidencyHandle: ...
    def register_source(self, load: Any, fields: Mapping[str, Any], *,
                        meta: Optional[CKKSMeta] = None, storage_nbytes: int = 0,
                        replica_mode: Optional[int] = None, label: Optional[str] = None,
                        priority: int = 0) -> ResidencyHandle: ...
    def ensure(self, handle: ResidencyHandle, at: _Loc, *,
               stream: Optional[_StreamLike] = None, limbs: int = 0) -> None: ...
    def cut_limbs(self, handle: ResidencyHandle, q: int, special: int, parts: int = 1,
                  alpha: int = 0, regen_fields: int = 0) -> None: ...
    def copy_limbs(self, handle: ResidencyHandle, at: _Loc, /) -> int: ...
    def copy_parts(self, handle: ResidencyHandle, at: _Loc, /) -> int: ...
    def move(self, handle: ResidencyHandle, to: _Loc, from_location: Optional[_Loc] = None, *,
             stream: Optional[_StreamLike] = None) -> None: ...
    def drop(self, handle: ResidencyHandle, at: _Loc, *, limbs: int = 0) -> None: ...
    def discard(self, handle: ResidencyHandle, /) -> None: ...
    def is_resident(self, handle: ResidencyHandle, at: _Loc, /) -> bool: ...
    def set_budget(self, at: _Loc, nbytes: int, /) -> None: ...
    def set_priority(self, handle: ResidencyHandle, priority: int, /) -> None: ...
    def acquire(self, handles: Union[ResidencyHandle, Iterable[ResidencyHandle]], at: _Loc,
                consumer_stream: Optional[_StreamLike] = None) -> ResidencyLease: ...
    def hold(self, handles: Union[ResidencyHandle, Iterable[ResidencyHandle]],
             at: _Loc) -> ResidencyHold: ...
    def reap(self) -> int: ...
    def wait_pending(self, at: _Loc, nbytes: int, /) -> int: ...
    def snapshot(self, *, placement: bool = False) -> _SnapshotRecord: ...
    def snapshot_json(self) -> Dict[str, Any]: ...
    def state_version(self) -> int: ...
    def trace(self) -> Any: ...
    def set_trace_capacity(self, capacity: int, /) -> None: ...
    def explain(self, plan: ResidencyPlan, /) -> _ExplanationRecord: ...
    def execute_actions(self, actions: Sequence[_Action], /, *,
                        transfer_streams: Optional[_Streams] = None) -> _Report: ...
    def scope(self, plan: ResidencyPlan, /, *,
              transfer_streams: Optional[_Streams] = None) -> ResidencyScope: ...
    def stream(self, location: _Loc, /) -> Stream: ...


# ---- automation ----------------------------------------------------------------------------

_Tiers = Mapping[_Loc, Sequence[_Loc]]


class DeterministicTieredLRU:
    def __new__(cls, fallback_tiers: Optional[_Tiers] = None) -> DeterministicTieredLRU: ...
    @property
    def name(self) -> str: ...


class DeterministicLookahead:
    def __new__(cls, fallback_tiers: Optional[_Tiers] = None,
                future: Sequence[Union[Tuple[int, ResidencyHandle, _Loc],
                                       Tuple[int, ResidencyHandle, _Loc, int]]] = ()
                ) -> DeterministicLookahead: ...
    @property
    def name(self) -> str: ...


class ResidencyDecision:
    @property
    def feasible(self) -> bool: ...
    @property
    def state_version(self) -> int: ...
    @property
    def explored_states(self) -> int: ...
    @property
    def policy(self) -> str: ...
    @property
    def explanation(self) -> _ExplanationRecord: ...
    @property
    def evictions(self) -> Tuple[_Action, ...]: ...
    @property
    def eviction_details(self) -> Tuple[_EvictionRecord, ...]: ...
    @property
    def protected(self) -> Tuple[_ProtectedRecord, ...]: ...
    @property
    def plan(self) -> ResidencyPlan: ...
    def predicted_peak_bytes(self, location: _Loc, /) -> int: ...
    def json(self) -> Dict[str, Any]: ...


class ResidencyUse:
    def __enter__(self) -> ResidencyUse: ...
    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc_value: Optional[BaseException], traceback: Optional[TracebackType], /
                 ) -> bool: ...
    def value(self, handle: ResidencyHandle, at: _Loc) -> LeasedValue: ...
    def add_consumer_stream(self, at: _Loc, stream: _StreamLike, /) -> None: ...
    @property
    def report(self) -> Any: ...   # a dict after a successful end, else None
    @property
    def decision(self) -> Any: ...


class ResidencyController:
    def __new__(cls, manager: ResidencyManager,
                policy: Union[DeterministicTieredLRU, DeterministicLookahead, None] = None
                ) -> ResidencyController: ...
    @property
    def manager(self) -> ResidencyManager: ...
    @property
    def policy(self) -> Union[DeterministicTieredLRU, DeterministicLookahead]: ...
    def decide(self, request: ResidencyRequest, /) -> ResidencyDecision: ...
    def use(self, request: Union[ResidencyRequest, ResidencyDecision], /, *,
            consumer_streams: Optional[_Streams] = None,
            transfer_streams: Optional[_Streams] = None, wait: bool = False) -> ResidencyUse: ...


# ---- plans (.rplan) ------------------------------------------------------------------------

class Program:
    def disasm(self) -> str: ...
    def values(self) -> List[Dict[str, Any]]: ...
    def instructions(self) -> List[Dict[str, Any]]: ...
    def value_cut(self, value: Union[int, str], limbs: int) -> Dict[str, Any]: ...


class _KernelCall: ...


_Source = Union[str, "os.PathLike[str]", Program]


class Runner:
    def __init__(self, program: _Source, *, values: Optional[Mapping[str, Any]] = None,
                 device: Optional[str] = None,
                 kernels: Optional[Mapping[str, _Kernel]] = None,
                 budgets: Optional[_Budgets] = None, scale: Optional[int] = None,
                 unknown_as_touch: bool = False, policy: Optional[str] = None,
                 loaders: Optional[Mapping[str, _Loader]] = None,
                 objective: Optional[str] = None, prefetch: Optional[int] = None) -> None: ...
    def run(self) -> _Report: ...
    def close(self) -> None: ...
    def __enter__(self) -> Runner: ...
    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc_value: Optional[BaseException], traceback: Optional[TracebackType], /
                 ) -> bool: ...
    @property
    def program(self) -> Program: ...
    @property
    def values(self) -> Dict[str, Any]: ...


def cuda_location(index_or_text: Union[str, int, Location], /) -> Location: ...
def compile(text_or_path: _Source, *, filename: Optional[str] = None,
            budgets: Optional[_Budgets] = None) -> Program: ...
def check(program: _Source, *, budgets: Optional[_Budgets] = None,
          policy: Optional[str] = None, objective: Optional[str] = None) -> _Report: ...
def min_budget(program: _Source, location: _Loc, *, budgets: Optional[_Budgets] = None,
               policy: Optional[str] = None,
               objective: Optional[str] = None) -> _MinBudgetRecord: ...
def run(program: _Source, *, device: Optional[str] = None,
        kernels: Optional[Mapping[str, _Kernel]] = None, budgets: Optional[_Budgets] = None,
        scale: Optional[int] = None, unknown_as_touch: bool = False, policy: Optional[str] = None,
        loaders: Optional[Mapping[str, _Loader]] = None, objective: Optional[str] = None,
        prefetch: Optional[int] = None) -> _Report: ...
def to(value: Any, location: _Loc, *, stream: Optional[_StreamLike] = None,
       manager: Optional[ResidencyManager] = None) -> Value: ...
def _set_types(*, meta: type, ensure: type, move: type, drop: type, discard: type,
               reservation: type) -> None: ...
def _c_timing(manager: ResidencyManager, op: str, handle: ResidencyHandle, at: _Loc,
              batches: int, per_batch: int, /) -> Any: ...
def _c_run_timing(text: str, device: str, runs: int, kind: str, /) -> float: ...
def _drain_releases() -> None: ...


# ---- exceptions (one per fhr_status) --------------------------------------------------------

class ResidencyError(Exception):
    status: str
    message: str
    phase: Optional[str]
    action_index: int
    cause: str
    handle: Optional[ResidencyHandle]
    location: Optional[Location]
    bytes_short: int
    partial_report: Any                     # the report up to the failure, or None
    action: Optional[_Action]
    report: _Report                         # set by run and check when the VM reported
    diagnostics: List[Dict[str, Any]]       # set by compile


class ResidencyValueError(ResidencyError, ValueError): ...
class ResidencyHandleError(ResidencyError): ...
class ResidencyLocationError(ResidencyError): ...
class ResidencyReplicaError(ResidencyError): ...
class ResidencyStateError(ResidencyError): ...
class ResidencyPreserveError(ResidencyError): ...
class ResidencyProtectedError(ResidencyError): ...
class ResidencyBudgetError(ResidencyError): ...
class ResidencyReentrancyError(ResidencyError): ...
class ResidencyMemoryError(ResidencyError, MemoryError): ...
class ResidencyBackendError(ResidencyError): ...
class ResidencySourceError(ResidencyError): ...
class ResidencyStaleStateError(ResidencyError): ...
class ResidencyPlanExecutionError(ResidencyError): ...
class ResidencyInfeasibleError(ResidencyError): ...
class ResidencyLeaseError(ResidencyError): ...
class ResidencyScopeError(ResidencyError): ...
class ResidencyUnsupportedError(ResidencyError): ...
