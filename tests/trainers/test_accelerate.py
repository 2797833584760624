"""Accelerate with the drop-in, prepared by ``stoker.torch.prepare_for_accelerate``.

Every scenario is compared, in the same test, with ``torch.utils.data.DataLoader``
prepared by ``accelerator.prepare`` (or torchdata's ``StatefulDataLoader`` where a
plain PyTorch loader cannot resume), and checks that stoker's engine does the loading:
the prepared loader's base is a stoker loader, and with workers the records are built
in stoker's worker processes.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
from typing import Any

import pytest
import torch
from accelerate.state import AcceleratorState, GradientState
from accelerate_helpers import (
    Records,
    evaluate,
    fresh_accelerator,
    make_loader,
    model_and_optimizer,
    train,
)

import stoker.torch as st
from stoker.errors import ConfigError

HERE = pathlib.Path(__file__).parent
SRC = HERE.parents[1] / "src"
KINDS = ("torch", "stoker")
# torchdata's StatefulDataLoader (Accelerate's base with use_stateful_dataloader=True)
# warns when it is built under this PyTorch.
STATEFUL_WARNING = "ignore:'set_vital' is deprecated:UserWarning"


@pytest.fixture(autouse=True)
def _clear_accelerate_state() -> Any:
    """Each test builds its own accelerators; none leaves Accelerate's process-wide
    state to the tests after it."""
    yield
    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()


def ids(loader: Any) -> list[list[int]]:
    return [batch["id"].tolist() for batch in loader]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def two_processes(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The scenarios of accelerate_scripts/two_processes.py, run once by torchrun on
    two CPU processes (gloo, 127.0.0.1); one result per rank."""
    out = tmp_path_factory.mktemp("accelerate")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)])}
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--nnodes=1",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(HERE / "accelerate_scripts" / "two_processes.py"),
        str(out),
    ]
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        pytest.fail(f"the two-process run timed out:\n{output.decode()[-4000:]}")
    written = sorted(path.name for path in out.iterdir())
    assert proc.returncode == 0, f"results written: {written}\n{output.decode()[-4000:]}"
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)]


# -- prepare() --------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
def test_prepare_one_process_trains_as_torch_with_stokers_engine(workers: int) -> None:
    runs = {}
    for kind in KINDS:
        accelerator = fresh_accelerator()
        loader = make_loader(kind, accelerator, Records(24), batch_size=4, num_workers=workers)
        model, optimizer = model_and_optimizer(accelerator)
        runs[kind] = train(accelerator, loader, model, optimizer, range(2))
        if kind == "stoker":
            assert isinstance(loader.base_dataloader, st.DataLoader)
            assert isinstance(loader, st.DataLoader)  # Accelerate reports its base's class
            assert loader in accelerator._dataloaders
    assert runs["stoker"]["steps"] == runs["torch"]["steps"]
    assert len(runs["stoker"]["steps"]) == 12
    assert runs["stoker"]["optimizer_steps"] == runs["torch"]["optimizer_steps"] == 12
    assert runs["stoker"]["weights"] == runs["torch"]["weights"]
    assert not any(runs["torch"]["in_stoker_workers"])
    assert all(runs["stoker"]["in_stoker_workers"]) == (workers > 0)


def test_prepare_returns_a_loader_accelerate_treats_as_prepared() -> None:
    accelerator = fresh_accelerator()
    loader = make_loader("stoker", accelerator, Records(8), batch_size=4)
    model = torch.nn.Linear(2, 1)
    _, again = accelerator.prepare(model, loader)
    assert again is loader
    assert accelerator._dataloaders.count(loader) == 1
    # The shuffle seed is the user's loader's, even if the global seed moved since.
    torch.manual_seed(7)
    user = st.DataLoader(Records(8), batch_size=4, shuffle=True)
    torch.manual_seed(8)
    prepared = st.prepare_for_accelerate(accelerator, user)
    assert prepared.state_dict()["seed"] == user.state_dict()["seed"] == 7
    assert ids(prepared) == ids(user)
    with pytest.raises(ConfigError, match=r"stoker\.torch\.DataLoader"):
        st.prepare_for_accelerate(accelerator, torch.utils.data.DataLoader(Records(8)))


def test_prepare_with_accelerates_seedable_sampler_shuffles_as_torch() -> None:
    orders = {}
    for kind in KINDS:
        accelerator = fresh_accelerator(seedable=True)
        loader = make_loader(kind, accelerator, Records(20), batch_size=4, shuffle=True)
        orders[kind] = [ids(loader) for _ in range(2)]
    assert orders["stoker"] == orders["torch"]
    assert orders["stoker"][0] != orders["stoker"][1]


def test_prepare_two_processes_each_reads_only_its_shard(two_processes: list[Any]) -> None:
    for result in two_processes:
        torch_run, stoker_run = result["prepare"]["torch"], result["prepare"]["stoker"]
        assert stoker_run["stoker_base"]
        assert stoker_run["steps"] == torch_run["steps"]
        assert stoker_run["optimizer_steps"] == torch_run["optimizer_steps"] == 8
        assert stoker_run["weights"] == torch_run["weights"]
        assert stoker_run["reads"] == torch_run["reads"]  # 16 of 32 records an epoch, twice
        assert len(stoker_run["reads"]) == 32
        assert len(set(stoker_run["reads"])) == 16
    for result in two_processes:  # with 2 workers in each process
        torch_run, stoker_run = (
            result["prepare_workers"]["torch"],
            result["prepare_workers"]["stoker"],
        )
        assert stoker_run["steps"] == torch_run["steps"] == result["prepare"]["torch"]["steps"]
        assert stoker_run["weights"] == torch_run["weights"]
        assert all(stoker_run["in_stoker_workers"])
        assert not any(torch_run["in_stoker_workers"])
    reads = [set(result["prepare"]["stoker"]["reads"]) for result in two_processes]
    assert reads[0].isdisjoint(reads[1])
    assert reads[0] | reads[1] == set(range(32))
    # Shuffled: each epoch, the two shards together are every record once.
    epochs = [result["shuffled"]["epochs"] for result in two_processes]
    for epoch in (0, 1):
        assert sorted(epochs[0][epoch] + epochs[1][epoch]) == list(range(32))
    assert epochs[0][0] != epochs[0][1]
    # A shuffle seed that differs between the processes is refused, not split wrongly.
    for result in two_processes:
        assert "shuffle seed differs across processes" in result["seeds_differ"]


# -- gradient accumulation and metrics ---------------------------------------------------


def test_gradient_accumulation_steps_at_the_end_of_the_loader() -> None:
    runs = {}
    for kind in KINDS:
        accelerator = fresh_accelerator(gradient_accumulation_steps=3)
        loader = make_loader(kind, accelerator, Records(32), batch_size=4)  # 8 batches
        model, optimizer = model_and_optimizer(accelerator)
        runs[kind] = train(accelerator, loader, model, optimizer, range(2))
    assert runs["stoker"]["optimizer_steps"] == runs["torch"]["optimizer_steps"] == 6
    assert runs["stoker"]["weights"] == runs["torch"]["weights"]


def test_gradient_accumulation_two_processes(two_processes: list[Any]) -> None:
    for result in two_processes:
        torch_run, stoker_run = result["accumulation"]["torch"], result["accumulation"]["stoker"]
        assert len(stoker_run["steps"]) == 16  # 8 batches an epoch in each process
        assert stoker_run["optimizer_steps"] == torch_run["optimizer_steps"] == 6
        assert stoker_run["steps"] == torch_run["steps"]
        assert stoker_run["weights"] == torch_run["weights"]


def test_gather_for_metrics_short_last_batch_two_processes(two_processes: list[Any]) -> None:
    for result in two_processes:
        gathered = result["metrics"]["stoker"]["gathered"]
        assert gathered == result["metrics"]["torch"]["gathered"]
        assert sorted(gathered) == list(range(30))  # 30 records, batches of 7


def test_gather_for_metrics_one_process() -> None:
    gathered = {}
    for kind in KINDS:
        accelerator = fresh_accelerator()
        gathered[kind] = evaluate(
            accelerator, make_loader(kind, accelerator, Records(30), batch_size=7)
        )
    assert gathered["stoker"] == gathered["torch"] == list(range(30))


# -- skip_first_batches -------------------------------------------------------------------


def test_skip_first_batches_then_the_next_epoch_as_torch() -> None:
    seen = {}
    for kind in KINDS:
        accelerator = fresh_accelerator()
        loader = make_loader(kind, accelerator, Records(20), batch_size=4)
        if kind == "torch":
            skipped = accelerator.skip_first_batches(loader, 3)
        else:
            skipped = st.skip_first_batches(loader, 3)
        length = len(skipped)
        seen[kind] = (length, ids(skipped), ids(loader))
    assert seen["stoker"] == seen["torch"]
    assert seen["stoker"][1] == [[12, 13, 14, 15], [16, 17, 18, 19]]


@pytest.mark.parametrize("workers", [0, 2])
def test_skip_first_batches_keeps_the_epoch_of_an_uninterrupted_run(workers: int) -> None:
    accelerator = fresh_accelerator()
    kwargs = {"batch_size": 4, "shuffle": True, "num_workers": workers}
    loader = make_loader("stoker", accelerator, Records(20), **kwargs)
    uninterrupted = [ids(loader) for _ in range(3)]
    assert uninterrupted[0] != uninterrupted[1]
    # Interrupted in the same run: 2 batches of epoch 0 read, then the rest skipped to.
    accelerator = fresh_accelerator()
    loader = make_loader("stoker", accelerator, Records(20), **kwargs)
    it = iter(loader)
    assert [next(it)["id"].tolist() for _ in range(2)] == uninterrupted[0][:2]
    assert ids(st.skip_first_batches(loader, 2)) == uninterrupted[0][2:]
    assert loader.iteration == 1
    assert ids(loader) == uninterrupted[1]
    # Resumed in a new run at batch 3 of epoch 1: the epoch is placed, then skipped into.
    accelerator = fresh_accelerator()
    loader = make_loader("stoker", accelerator, Records(20), **kwargs)
    loader.set_epoch(1)
    skipped = st.skip_first_batches(loader, 3)
    assert len(skipped) == 2
    batches = list(skipped)
    assert [b["id"].tolist() for b in batches] == uninterrupted[1][3:]
    assert all(v for b in batches for v in b["stoker_worker"].tolist()) == (workers > 0)
    assert ids(loader) == uninterrupted[2]


def test_skip_first_batches_refuses_a_loader_it_did_not_prepare() -> None:
    accelerator = fresh_accelerator()
    loader = accelerator.prepare(torch.utils.data.DataLoader(Records(8), batch_size=2))
    with pytest.raises(ConfigError, match="prepare_for_accelerate"):
        st.skip_first_batches(loader, 1)
    ours = make_loader("stoker", accelerator, Records(8), batch_size=2, shuffle=True)
    with pytest.raises(ConfigError, match="cannot skip 5 batches of an epoch of 4"):
        st.skip_first_batches(ours, 5)
    whole = [ids(ours) for _ in range(2)]
    ours.set_epoch(0)
    assert ids(st.skip_first_batches(ours, 4)) == []  # the whole epoch skipped
    assert ours.iteration == 1
    assert ids(ours) == whole[1]


# -- save_state / load_state ---------------------------------------------------------------


def _run_with_checkpoint(
    kind: str, directory: pathlib.Path, *, stateful: bool, at: tuple[int, int], **kwargs: Any
) -> dict[str, Any]:
    """Train 2 epochs of 8 batches uninterrupted; then again, saving the state after
    batch ``at[1]`` of epoch ``at[0]`` and resuming from it in a new accelerator."""
    epoch, step = at
    accelerator = fresh_accelerator(stateful=stateful)
    loader = make_loader(kind, accelerator, Records(32), batch_size=4, **kwargs)
    model, optimizer = model_and_optimizer(accelerator)
    uninterrupted = train(accelerator, loader, model, optimizer, range(2))

    accelerator = fresh_accelerator(stateful=stateful)
    loader = make_loader(kind, accelerator, Records(32), batch_size=4, **kwargs)
    model, optimizer = model_and_optimizer(accelerator)
    train(accelerator, loader, model, optimizer, range(epoch))
    for done, batch in enumerate(loader, start=1):
        loss = torch.nn.functional.mse_loss(model(batch["x"]), batch["y"])
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        if done == step:
            break
    accelerator.save_state(str(directory / kind))

    accelerator = fresh_accelerator(stateful=stateful)
    loader = make_loader(kind, accelerator, Records(32), batch_size=4, **kwargs)
    model, optimizer = model_and_optimizer(accelerator)
    accelerator.load_state(str(directory / kind))
    first_pass = None
    if not stateful:  # Accelerate's documented resume: skip the batches already seen
        if kind == "torch":
            first_pass = accelerator.skip_first_batches(loader, step)
        else:
            loader.set_epoch(epoch)
            first_pass = st.skip_first_batches(loader, step)
    resume_epoch = epoch + 1 if step == 8 else epoch  # a checkpoint after an epoch's last batch
    epochs = range(resume_epoch, 2)
    resumed = train(accelerator, loader, model, optimizer, epochs, first_pass=first_pass)
    return {"uninterrupted": uninterrupted, "resumed": resumed, "loader": loader}


@pytest.mark.filterwarnings(STATEFUL_WARNING)
@pytest.mark.parametrize("workers", [0, 2])
def test_save_and_load_state_with_a_stateful_dataloader(
    tmp_path: pathlib.Path, workers: int
) -> None:
    runs = {
        kind: _run_with_checkpoint(
            kind, tmp_path, stateful=True, at=(0, 3), num_workers=workers if kind == "stoker" else 0
        )
        for kind in KINDS
    }
    for kind in KINDS:
        whole, resumed = runs[kind]["uninterrupted"], runs[kind]["resumed"]
        assert len(resumed["steps"]) == 13, kind  # 16 batches, 3 before the checkpoint
        assert resumed["steps"] == whole["steps"][3:], kind
        assert resumed["weights"] == whole["weights"], kind
    assert runs["stoker"]["resumed"]["steps"] == runs["torch"]["resumed"]["steps"]
    assert runs["stoker"]["resumed"]["weights"] == runs["torch"]["resumed"]["weights"]
    assert isinstance(runs["stoker"]["loader"].base_dataloader, st.DataLoader)
    assert all(runs["stoker"]["resumed"]["in_stoker_workers"]) == (workers > 0)


@pytest.mark.filterwarnings(STATEFUL_WARNING)
def test_load_state_saved_at_the_end_of_an_epoch_starts_the_next(tmp_path: pathlib.Path) -> None:
    runs = {kind: _run_with_checkpoint(kind, tmp_path, stateful=True, at=(0, 8)) for kind in KINDS}
    assert runs["stoker"]["resumed"]["steps"] == runs["torch"]["resumed"]["steps"]
    run = _run_with_checkpoint(
        "stoker", tmp_path / "shuffled", stateful=True, at=(0, 8), shuffle=True
    )
    assert run["resumed"]["steps"] == run["uninterrupted"]["steps"][8:]
    assert run["resumed"]["weights"] == run["uninterrupted"]["weights"]
    # The loader's epoch count is the uninterrupted run's (Accelerate's own loader
    # restarts its count at 0 after load_state).
    assert run["loader"].iteration == 2
    assert runs["torch"]["loader"].iteration == 1


def test_save_and_load_state_without_a_stateful_dataloader(tmp_path: pathlib.Path) -> None:
    runs = {kind: _run_with_checkpoint(kind, tmp_path, stateful=False, at=(1, 3)) for kind in KINDS}
    for kind in KINDS:
        whole, resumed = runs[kind]["uninterrupted"], runs[kind]["resumed"]
        assert resumed["steps"] == whole["steps"][11:], kind
        assert resumed["weights"] == whole["weights"], kind
    assert runs["stoker"]["resumed"]["steps"] == runs["torch"]["resumed"]["steps"]
    # Shuffled: the resumed order is the uninterrupted run's (placed epoch, then skip).
    run = _run_with_checkpoint(
        "stoker", tmp_path / "shuffled", stateful=False, at=(1, 3), shuffle=True
    )
    assert run["resumed"]["steps"] == run["uninterrupted"]["steps"][11:]
    assert run["resumed"]["weights"] == run["uninterrupted"]["weights"]


# -- register_for_checkpointing -----------------------------------------------------------


@pytest.mark.filterwarnings(STATEFUL_WARNING)
def test_register_for_checkpointing_a_stoker_loader(tmp_path: pathlib.Path) -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    def build(kind: str, shuffle: bool) -> Any:
        torch.manual_seed(0)
        if kind == "torch":
            return StatefulDataLoader(Records(20), batch_size=4, shuffle=shuffle)
        return st.DataLoader(Records(20), batch_size=4, shuffle=shuffle, num_workers=2)

    rest = {}
    for kind, shuffle in (("torch", False), ("stoker", False), ("stoker", True)):
        loader = build(kind, shuffle)
        whole = [ids(loader) for _ in range(2)]
        loader = build(kind, shuffle)
        accelerator = fresh_accelerator()
        accelerator.register_for_checkpointing(loader)
        ids(loader)
        it = iter(loader)
        [next(it) for _ in range(2)]
        accelerator.save_state(str(tmp_path / f"{kind}{shuffle}"))
        del it
        loader = build(kind, shuffle)
        accelerator = fresh_accelerator()
        accelerator.register_for_checkpointing(loader)
        accelerator.load_state(str(tmp_path / f"{kind}{shuffle}"))
        rest[kind, shuffle] = ids(loader)
        assert rest[kind, shuffle] == whole[1][2:], (kind, shuffle)
    assert (
        rest["stoker", False]
        == rest["torch", False]
        == [[8, 9, 10, 11], [12, 13, 14, 15], [16, 17, 18, 19]]
    )


# -- the module and its page ---------------------------------------------------------------


def test_import_stoker_torch_does_not_import_accelerate() -> None:
    code = "import sys, stoker.torch\nassert 'accelerate' not in sys.modules\n"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120, env=env)


def test_the_accelerate_page_has_a_runnable_example() -> None:
    # tests/docs/test_docs_pages.py runs every ```python block of the page in a subprocess.
    page = (HERE.parents[1] / "docs" / "accelerate.md").read_text(encoding="utf-8")
    assert "```python\n" in page
    assert "st.prepare_for_accelerate(accelerator, loader)" in page


def test_register_for_checkpointing_a_prepared_loader(tmp_path: pathlib.Path) -> None:
    # Without use_stateful_dataloader, registering the prepared loader saves its position.
    kwargs = {"batch_size": 4, "shuffle": True, "num_workers": 2}
    accelerator = fresh_accelerator()
    loader = make_loader("stoker", accelerator, Records(20), **kwargs)
    whole = [ids(loader) for _ in range(3)]
    accelerator = fresh_accelerator()
    loader = make_loader("stoker", accelerator, Records(20), **kwargs)
    accelerator.register_for_checkpointing(loader)
    ids(loader)
    for step, _ in enumerate(loader):
        if step == 1:
            accelerator.save_state(str(tmp_path))
            break
    accelerator = fresh_accelerator()
    loader = make_loader("stoker", accelerator, Records(20), **kwargs)
    accelerator.register_for_checkpointing(loader)
    accelerator.load_state(str(tmp_path))
    assert loader.iteration == 1
    assert ids(loader) == whole[1][2:]
    assert ids(loader) == whole[2]
