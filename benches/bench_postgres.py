"""PostgreSQL persistence of agent sessions, side by side with LangGraph and the OpenAI Agents SDK.

Every row runs against one private cluster that this module starts; rows whose package is
missing are skipped. The cluster runs with `fsync=off` unless `DSHKIT_BENCH_PG_FSYNC=on`: a WAL
flush costs every row the same per commit (10-20 ms on a slow shared disk, well under 1 ms on a
server SSD), so by default the figures are the stores' own work (statements, round trips, bytes). Each scenario runs a few whole rounds (`ROUNDS`) and records its figures
in `extra_info`; the pytest-benchmark time is the time of one whole round.

- `agent-100-steps`: a 100-step agent session (one tool call per step) persisted with
  `"checkpoint"`. The store cost of a step is the time spent inside the store (dshkit's
  `append`/`sync`, LangGraph's checkpointer methods, the SDK session's `add_items`) between one
  model call and the next; the figures are medians over rounds of steps 8-12 ("step 10") and
  96-100 ("step 100"); the dshkit row also records the CPU time of those calls (the calling
  thread's plus the server backend's, from `/proc`), which a loaded machine inflates far less
  than wall time. LangGraph runs `create_react_agent` with a fake tool-calling chat model and
  `PostgresSaver`; the SDK row appends the same items (the call and its output) per step to a
  `SQLAlchemySession`, which is the least its runner stores.
- `postgres-throughput`: events per second appended by 50 concurrent sessions (threads), each
  logging 10 one-call turns, syncing at the agent's durability points.
- `postgres-loop-lag`: the longest the event loop was blocked while an async agent ran 100 steps
  against PostgreSQL and against JSON Lines (a sampler task asking for 1 ms sleeps).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dshkit
from dshkit.agent import Agent, Tool
from dshkit.models import ScriptedModel
from dshkit.session import Session

psycopg = pytest.importorskip("psycopg", reason="needs psycopg (dshkit[postgres])")

STEPS = 100
ROUNDS = 3
GROUP = "agent-100-steps"
EARLY, LATE = range(8, 13), range(96, 101)

TARGETS = [
    {
        "name": "PostgreSQL checkpoint: store cost per step flat (step 100 <= 1.2x step 10)",
        "group": GROUP,
        "row": "test_dshkit_postgres_100_steps",
        "extra_info": "step100_over_step10",
        "max_value": 1.2,
    },
    {
        "name": "PostgreSQL checkpoint: store CPU per step (client + server backend) flat (step 100 <= 1.2x step 10)",
        "group": GROUP,
        "row": "test_dshkit_postgres_100_steps",
        "extra_info": "cpu_step100_over_step10",
        "max_value": 1.2,
    },
    {
        "name": "PostgreSQL checkpoint: >= 5x less store time than LangGraph PostgresSaver at step 100",
        "group": GROUP,
        "row": "test_langgraph_postgres_saver_100_steps",
        "extra_info": "dshkit_speedup_at_step100",
        "min_value": 5.0,
    },
]


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from postgres_server import server_or_skip

    yield from server_or_skip("dshkit_bench", fsync=os.environ.get("DSHKIT_BENCH_PG_FSYNC", "off") == "on")


RESULTS: dict[str, list[float]] = {}  # row -> [step 10 cost, step 100 cost] (seconds)


def _per_step_costs(rounds: list[list[float]]) -> tuple[float, float]:
    """Median store cost of the steps around 10 and around 100, over every round.

    Medians, not means: on a shared machine a step now and then waits a scheduler tick (4-30 ms)
    for reasons that have nothing to do with the store.
    """
    early = statistics.median(costs[step - 1] for costs in rounds for step in EARLY)
    late = statistics.median(costs[step - 1] for costs in rounds for step in LATE)
    return early, late


def _record(benchmark: Any, row: str, rounds: list[list[float]]) -> None:
    early, late = _per_step_costs(rounds)
    RESULTS[row] = [early, late]
    benchmark.extra_info.update(
        steps=STEPS,
        store_us_at_step10=round(early * 1e6, 1),
        store_us_at_step100=round(late * 1e6, 1),
        step100_over_step10=round(late / early, 3) if early else float("inf"),
    )
    if "dshkit" in RESULTS and row != "dshkit":
        benchmark.extra_info["dshkit_speedup_at_step100"] = round(late / RESULTS["dshkit"][1], 1)


# -- dshkit ---------------------------------------------------------------------------------


async def _noop(arguments: Any, ctx: Any) -> str:
    return "ok"


TOOLS = [Tool("noop", "does nothing", {"type": "object", "properties": {}}, _noop)]


def _script(steps: int) -> list[Any]:
    responses: list[Any] = []
    for step in range(steps - 1):
        responses.append([
            {"type": "tool_call_delta", "index": 0, "id": f"call-{step}", "name": "noop", "arguments": "{}"},
            {"type": "usage", "usage": {"prompt_tokens": 100, "completion_tokens": 5}},
            {"type": "finish", "reason": "tool_calls"},
        ])
    responses.append("Done: every step ran.")
    return responses


def _backend_cpu_ns(store: Any) -> int | None:
    """CPU time the store's server backend has used so far (Linux `/proc`), or None."""
    connection = getattr(store, "_connection", None)
    if connection is None or connection.closed:
        return None
    try:
        with open(f"/proc/{connection.info.backend_pid}/schedstat") as stat:
            return int(stat.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None  # not Linux, or a server on another machine


class TimedStore:
    """Wraps a store and charges the time of every call to the current agent step.

    `costs` is wall time; `cpu_costs` the CPU time of the calling thread plus that of the
    store's server backend, which a loaded machine does not inflate the way it does wall time.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.costs: list[float] = [0.0] * (STEPS + 1)
        self.cpu_costs: list[float] = [0.0] * (STEPS + 1)
        self.step = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _charge(self, call: Any, *args: Any) -> None:
        index = max(self.step - 1, 0)
        server_before = _backend_cpu_ns(self.inner)
        cpu_before, start = time.thread_time(), time.perf_counter()
        call(*args)
        self.costs[index] += time.perf_counter() - start
        self.cpu_costs[index] += time.thread_time() - cpu_before
        server_after = _backend_cpu_ns(self.inner)
        if server_before is not None and server_after is not None:
            self.cpu_costs[index] += (server_after - server_before) / 1e9

    def append(self, event: Any, record: str) -> None:
        if event.type == "step/start":
            self.step += 1
        self._charge(self.inner.append, event, record)

    def sync(self) -> None:
        self._charge(self.inner.sync)


async def _agent_session(session: Session) -> None:
    agent = Agent(ScriptedModel(_script(STEPS)), session=session, tools=TOOLS, system="bench")
    agent.followup(dshkit.create_user_message("run the steps", source={"kind": "user"}))
    await agent.when_idle()


@pytest.mark.benchmark(group=GROUP)
def test_dshkit_postgres_100_steps(benchmark: Any, pg_url: str) -> None:
    from dshkit.session import PostgresStore

    rounds: list[list[float]] = []
    cpu_rounds: list[list[float]] = []

    def one_round() -> None:
        store = TimedStore(PostgresStore(pg_url))
        with Session.create(store=store, durability="checkpoint") as session:
            asyncio.run(_agent_session(session))
            assert sum(event.type == "step/start" for event in session.events) == STEPS
        rounds.append(store.costs)
        cpu_rounds.append(store.cpu_costs)

    benchmark.pedantic(one_round, rounds=ROUNDS, warmup_rounds=1)
    _record(benchmark, "dshkit", rounds[-ROUNDS:])
    cpu_early, cpu_late = _per_step_costs(cpu_rounds[-ROUNDS:])
    benchmark.extra_info.update(
        cpu_us_at_step10=round(cpu_early * 1e6, 1),
        cpu_us_at_step100=round(cpu_late * 1e6, 1),
        cpu_step100_over_step10=round(cpu_late / cpu_early, 3) if cpu_early else float("inf"),
    )


# -- LangGraph --------------------------------------------------------------------------------


@pytest.mark.benchmark(group=GROUP)
def test_langgraph_postgres_saver_100_steps(benchmark: Any, pg_url: str) -> None:
    pytest.importorskip("langgraph.checkpoint.postgres", reason="needs langgraph-checkpoint-postgres")
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.checkpoint.postgres import PostgresSaver
    from langgraph.prebuilt import create_react_agent

    clock = {"step": 0}

    class FakeToolCaller(BaseChatModel):
        """Calls the `noop` tool once per step, then answers (like the scripted dshkit model)."""

        @property
        def _llm_type(self) -> str:
            return "fake-tool-caller"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
            clock["step"] += 1
            step = clock["step"]
            if step < STEPS:
                message = AIMessage(content="", tool_calls=[{"name": "noop", "args": {}, "id": f"call-{step}"}])
            else:
                message = AIMessage(content="Done: every step ran.")
            return ChatResult(generations=[ChatGeneration(message=message)])

    @tool
    def noop() -> str:
        """does nothing"""
        return "ok"

    rounds: list[list[float]] = []
    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=0) as connection:
        saver = PostgresSaver(connection)
        saver.setup()
        costs: list[float] = []
        for name in ("put", "put_writes", "get_tuple"):
            original = getattr(saver, name)

            def timed(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    costs[max(clock["step"] - 1, 0)] += time.perf_counter() - start

            setattr(saver, name, timed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # moved to langchain.agents in LangGraph 1.x
            warnings.filterwarnings("ignore", message="create_react_agent has been moved")
            graph = create_react_agent(FakeToolCaller(), [noop], checkpointer=saver)

        def one_round() -> None:
            clock["step"] = 0
            costs[:] = [0.0] * (STEPS + 1)
            config = {"configurable": {"thread_id": dshkit.new_message_id()}, "recursion_limit": 4 * STEPS}
            # durability="sync": each checkpoint is written before the next step, as dshkit's sync is.
            graph.invoke({"messages": [("user", "run the steps")]}, config, durability="sync")
            assert clock["step"] == STEPS
            rounds.append(list(costs))

        benchmark.pedantic(one_round, rounds=ROUNDS, warmup_rounds=1)
    _record(benchmark, "langgraph", rounds[-ROUNDS:])


# -- OpenAI Agents SDK ------------------------------------------------------------------------


@pytest.mark.benchmark(group=GROUP)
def test_openai_agents_sqlalchemy_session_100_steps(benchmark: Any, pg_url: str) -> None:
    pytest.importorskip("asyncpg", reason="needs asyncpg")
    sqlalchemy_session = pytest.importorskip("agents.extensions.memory.sqlalchemy_session", reason="needs openai-agents[sqlalchemy]")
    base, query = pg_url.split("?", 1)
    url = base.replace("postgresql://", "postgresql+asyncpg://") + "?" + query
    rounds: list[list[float]] = []

    async def run_session() -> list[float]:
        session = sqlalchemy_session.SQLAlchemySession.from_url(dshkit.new_message_id(), url=url, create_tables=True)
        costs = [0.0] * (STEPS + 1)
        try:
            start = time.perf_counter()
            await session.add_items([{"role": "user", "content": "run the steps"}])
            costs[0] += time.perf_counter() - start
            for step in range(1, STEPS + 1):
                if step < STEPS:
                    call_id = f"call-{step}"
                    items: list[Any] = [
                        {"type": "function_call", "call_id": call_id, "name": "noop", "arguments": "{}", "id": f"fc-{step}"},
                        {"type": "function_call_output", "call_id": call_id, "output": "ok"},
                    ]
                else:
                    items = [{"role": "assistant", "content": "Done: every step ran."}]
                start = time.perf_counter()
                await session.add_items(items)
                costs[step - 1] += time.perf_counter() - start
        finally:
            await session.engine.dispose()
        return costs

    def one_round() -> None:
        rounds.append(asyncio.run(run_session()))

    benchmark.pedantic(one_round, rounds=ROUNDS, warmup_rounds=1)
    _record(benchmark, "openai-agents", rounds[-ROUNDS:])


# -- throughput and loop lag ------------------------------------------------------------------


def _one_call_turns(session: Session, turns: int) -> None:
    for turn in range(1, turns + 1):
        session.append("turn/start", {"turn": turn})
        session.append("step/start", {"turn": turn, "step": 1})
        session.append("user/message", dshkit.create_user_message(f"prompt {turn}", source={"kind": "user"}))
        session.sync()
        content = [{"type": "tool_call", "id": f"c{turn}", "name": "noop", "arguments": "{}"}]
        session.append("assistant/message", {"turn": turn, "step": 1, "message": dshkit.create_assistant_message(content, provider="b", model="m")})
        call = session.append("tool/call", {"turn": turn, "step": 1, "call_id": f"c{turn}", "name": "noop", "arguments": "{}"})
        session.sync()
        result = dshkit.create_tool_result_message(f"c{turn}", "ok")
        session.append("tool/result", {"turn": turn, "step": 1, "message": result}, source_event_seqs=[call.seq])
        session.append("step/end", {"turn": turn, "step": 1})
        session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})
        session.sync()


@pytest.mark.parametrize("durability", ["checkpoint", "always"])
@pytest.mark.benchmark(group="postgres-throughput")
def test_fifty_concurrent_sessions(benchmark: Any, pg_url: str, durability: str) -> None:
    turns, sessions = 10, 50
    events = turns * 8 * sessions

    def one_round() -> None:
        def work() -> None:
            with Session.create(pg_url, durability=durability) as session:
                _one_call_turns(session, turns)

        threads = [threading.Thread(target=work) for _ in range(sessions)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    benchmark.pedantic(one_round, rounds=3, warmup_rounds=1)
    benchmark.extra_info["events_per_round"] = events
    if benchmark.stats is not None:  # None in a smoke run (--benchmark-disable): nothing was timed
        benchmark.extra_info["events_per_second"] = round(events / benchmark.stats.stats.median)


async def _max_loop_lag(session: Session) -> tuple[float, float]:
    """(max, p99) lateness in seconds of 1 ms sleeps while an agent runs 100 steps on `session`."""
    lags: list[float] = []
    done = asyncio.Event()

    async def sampler() -> None:
        while not done.is_set():
            start = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - start - 0.001)

    task = asyncio.ensure_future(sampler())
    await _agent_session(session)
    done.set()
    await task
    lags.sort()
    return lags[-1], lags[int(len(lags) * 0.99)]


@pytest.mark.benchmark(group="postgres-loop-lag")
@pytest.mark.parametrize("where", ["postgres", "jsonl"])
def test_event_loop_lag_during_an_agent_run(benchmark: Any, pg_url: str, tmp_path: Path, where: str) -> None:
    lags: list[tuple[float, float]] = []

    def one_round() -> None:
        location = pg_url if where == "postgres" else tmp_path / f"{dshkit.new_message_id()}.jsonl"
        with Session.create(location, durability="checkpoint") as session:
            lags.append(asyncio.run(_max_loop_lag(session)))

    benchmark.pedantic(one_round, rounds=3, warmup_rounds=1)
    benchmark.extra_info["max_loop_lag_ms"] = round(statistics.median(lag[0] for lag in lags) * 1e3, 2)
    benchmark.extra_info["p99_loop_lag_ms"] = round(statistics.median(lag[1] for lag in lags) * 1e3, 2)
