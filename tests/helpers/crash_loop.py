"""SIGKILL a SYNC_FLUSH writer at random points; every acknowledged message must survive.

The parent side of the crash tests: a forking writer (``crash_child.py``) is killed at random
points and the store is reopened and checked after each kill. The fast variants live in
``tests/integration/store/test_crash_recovery.py``; the 2000-kill variant in
``tests/chaos/test_crash_recovery_chaos.py`` (it runs for many minutes, and a 3600 s timeout
marker overrides ``--timeout``: under ``tests/integration`` it looked like a hang).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import random
import signal
import sys
from pathlib import Path

from rocketpy.common.aio import wait_until
from rocketpy.common.message.decoder import decode_record
from rocketpy.store.message_store import MessageStore
from tests.helpers.crash_child import body, config

CHILD = Path(__file__).with_name("crash_child.py")


class CrashZygote:
    """The forking writer parent (crash_child.zygote) and the lines it and its writers print."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.recent: collections.deque[str] = collections.deque(maxlen=6)
        self.first: list[str] = []  # a round's first lines (diagnostics)
        self.writer_pid = 0  # the writer forked last (it shares the zygote's stdout pipe)

    @classmethod
    async def start(cls, root: Path, default_sizes: bool) -> CrashZygote:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(CHILD), str(root), *(["default"] if default_sizes else []),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        )  # fmt: skip
        zygote = cls(proc)
        async with asyncio.timeout(20):
            while (await zygote.line())[:1] != ["zygote"]:
                pass
        return zygote

    async def line(self) -> list[str]:
        assert self.proc.stdout is not None
        raw = await self.proc.stdout.readline()
        if not raw:
            raise EOFError("crash zygote exited")
        text = raw.decode(errors="replace")
        if len(self.first) < 8:
            self.first.append(text.rstrip())
        self.recent.append(text.rstrip())
        return text.split()

    async def stop(self) -> None:
        """End the zygote (EOF on its stdin, SIGKILL after 10 s) and any writer it left.

        A writer that outlives the zygote holds the stdout pipe open, and on Python 3.11
        ``Process.wait()`` returns only once every pipe is closed: the exit is therefore
        watched through ``returncode`` and the writer is killed before waiting."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await wait_until(lambda: self.proc.returncode is not None, 10)
        except TimeoutError:
            self.proc.kill()
            await wait_until(lambda: self.proc.returncode is not None, 10)
        finally:
            if self.writer_pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.writer_pid, signal.SIGKILL)
        async with asyncio.timeout(10):
            await self.proc.wait()

    async def run_and_kill(self, rng: random.Random) -> list[tuple[int, int]]:
        """Fork a writer, read a random number of acks, SIGKILL it; every ack printed before
        it died counts."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"fork\n")
        self.recent.clear()
        self.first.clear()
        acked: list[tuple[int, int]] = []
        want = rng.randint(0, 40)
        # Generous: each ack waits for an fdatasync, which a shared disk can stall for seconds.
        try:
            async with asyncio.timeout(60):
                await self._acks_then_kill(acked, want)
        except TimeoutError:
            raise AssertionError(
                f"no progress for 60 s: {len(acked)}/{want} acks, zygote returncode "
                f"{self.proc.returncode}, first lines {self.first}, last {list(self.recent)}"
            ) from None
        return acked

    async def _acks_then_kill(self, acked: list[tuple[int, int]], want: int) -> None:
        """Read the writer's pid and ``want`` acks into ``acked``, SIGKILL it, read until the
        zygote reports its death (acks printed meanwhile count too)."""
        pid = ready = 0
        while pid == 0 or ready == 0 or len(acked) < want:
            words = await self.line()
            if words[:1] == ["pid"]:
                pid = self.writer_pid = int(words[1])
            elif words[:1] == ["ready"] and len(words) == 2 and words[1].isdigit():
                ready = int(words[1])
            elif words[:1] == ["dead"]:
                raise AssertionError(f"writer {words[1]} died before the kill (see stderr)")
            elif _is_ack(words):
                acked.append((int(words[1]), int(words[2])))
        if ready != pid:
            # Seen once in a 2000-kill run: acks went on for 60 s after the SIGKILL. The pid
            # the zygote reports must be the process that writes; never kill another one.
            raise AssertionError(f"zygote reported writer {pid}, writer {ready} is acking; "
                                 f"last lines {list(self.recent)}")  # fmt: skip
        os.kill(pid, signal.SIGKILL)
        while not _is_dead_line(words := await self.line(), pid):
            if _is_ack(words):
                acked.append((int(words[1]), int(words[2])))


def _is_ack(words: list[str]) -> bool:
    """A whole ``ack <offset> <queue offset>`` line (a kill can cut a writer's last line)."""
    return len(words) == 3 and words[0] == "ack" and words[1].isdigit() and words[2].isdigit()


def _is_dead_line(words: list[str], pid: int) -> bool:
    """The zygote's ``dead <pid>``, also when it follows a line the kill cut short."""
    return len(words) >= 2 and words[-1] == str(pid) and words[-2].endswith("dead")


async def _verify(root: Path, acked: dict[int, int], since: int, default_sizes: bool) -> str:
    """Reopen the store after a kill and check every ack from queue offset ``since`` on (0: all
    of them), and every consume-queue unit from there; returns where its recovery walk started
    (``dispatched`` when the killed writer had written ``abort`` with this boot id)."""
    store = MessageStore(config(root, default_sizes))
    await store.start()
    try:
        assert store.recovery is not None
        start_from = store.recovery.start_from
        assert store.max_offset_in_queue("Crash", 0) >= len(acked)
        for queue_offset, wrote in acked.items() if since == 0 else _acked_from(acked, since):
            raw = store.look_message_by_offset(wrote)
            assert raw is not None, wrote
            rec = decode_record(raw)
            assert (rec.queue_offset, rec.body) == (queue_offset, body(queue_offset))
        q = store.queues[("Crash", 0)] if acked else None
        if q is not None:
            for n in range(min(since, q.max_offset), q.max_offset):
                unit = q.get_unit(n)
                assert unit is not None
                raw = store.look_message_by_offset(unit.commit_log_offset)
                assert raw is not None
                assert decode_record(raw).queue_offset == n
    finally:
        await store.stop()
    return start_from


def _acked_from(acked: dict[int, int], since: int) -> list[tuple[int, int]]:
    """The acks at queue offset ``since`` and above (acks are made in rising queue offsets, so
    the dict's tail holds them)."""
    tail: list[tuple[int, int]] = []
    for queue_offset in reversed(acked):
        if queue_offset < since:
            break
        tail.append((queue_offset, acked[queue_offset]))
    return tail


def crash_kills(default: int) -> int:
    return int(os.environ.get("ROCKETPY_CRASH_KILLS", default))


FULL_CHECK_EVERY = 50


async def crash_loop(tmp_path: Path, kills: int, default_sizes: bool = False) -> None:
    """``kills`` rounds of fork, acks, SIGKILL, reopen and check.

    After each kill the store is reopened and checked for what was acknowledged since the
    last full check (the tail, which a kill can tear), and no ack may be above the recovered
    end; every FULL_CHECK_EVERY kills and after the last one, every ack ever made is read
    back. Damage to an older ack cannot heal (later writers only append past it), so a full
    check still finds it; checking everything after every kill made 2000 kills quadratic
    (17 minutes, most of it re-reading the same acks)."""
    rng = random.Random(1234)
    acked: dict[int, int] = {}
    starts: collections.Counter[str] = collections.Counter()
    since = 0  # acks below this queue offset were read back by the last full check
    zygote = await CrashZygote.start(tmp_path, default_sizes)
    try:
        for kill in range(1, kills + 1):
            for wrote, queue_offset in await zygote.run_and_kill(rng):
                acked[queue_offset] = wrote
            full = kill % FULL_CHECK_EVERY == 0 or kill == kills
            # Leave ``abort`` in place: the next start is an abnormal recovery. The deadline
            # turns a hang into a traceback at the await that hung.
            async with asyncio.timeout(120):
                starts[await _verify(tmp_path, acked, 0 if full else since, default_sizes)] += 1
            if full and acked:
                since = max(acked) + 1
            # A crash marker without a boot id: the next writer recovers as after a crash of
            # the machine (the checkpoint's segment), this verification as after a SIGKILL.
            config(tmp_path).abort_path.write_text("crashed")
    finally:
        await zygote.stop()
    # A writer killed before it wrote ``abort`` leaves the marker without a boot id.
    assert starts["dispatched"] >= kills // 2, starts
