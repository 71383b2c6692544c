import numpy as np
import pytest

import ember
import ember.lax as lax
from ember.config import DEFAULT_DUMP_DIR, Config
from ember.ir.graph import Graph
from ember.ir.parser import parse_graph
from ember.ir.verifier import VerificationError
from ember.passes import pipeline
from ember.passes.pipeline import GRAPH_PIPELINES, run_pipeline


def double_sine(x):
    return lax.add(lax.sin(x), lax.mul(lax.sin(x), 1.0))


def _graph():
    return ember.make_graph(double_sine)(np.ones(3, np.float32))


def test_every_backend_has_a_pipeline_of_named_passes():
    assert set(GRAPH_PIPELINES) == {"reference", "cpu", "cuda", "opencl"}
    for passes in GRAPH_PIPELINES.values():
        assert passes and all(callable(p) and p.__name__ for p in passes)


def test_cpu_pipeline_optimizes(same_values):
    graph = _graph()
    optimized = run_pipeline(graph, "cpu")
    assert [e.prim.name for e in optimized.eqns] == ["sin", "add"]
    same_values(graph, optimized)


def test_reference_pipeline_only_drops_dead_code():
    graph = _graph()
    assert len(run_pipeline(graph, "reference").eqns) == len(graph.eqns)


def test_dump_writes_the_graph_after_every_pass(tmp_path):
    with ember.config.override(dump_dir=str(tmp_path)):
        run_pipeline(_graph(), "cpu")
    (folder,) = tmp_path.iterdir()
    assert folder.name.endswith("-double_sine.cpu")
    names = sorted(p.name for p in folder.iterdir())
    passes = [graph_pass.__name__ for graph_pass in GRAPH_PIPELINES["cpu"]]
    cse_step = passes.index("cse") + 1
    assert names[0] == "0000-input.txt" and names[cse_step] == f"{cse_step:04d}-after-cse.txt"
    assert len(names) == len(GRAPH_PIPELINES["cpu"]) + 1
    final = parse_graph((folder / names[-1]).read_text())
    assert [e.prim.name for e in final.eqns] == ["sin", "add"]


def test_dump_folder_takes_a_given_name(tmp_path):
    with ember.config.override(dump_dir=str(tmp_path)):
        run_pipeline(_graph(), "reference", program_name="my_step")
    assert [p.name.split("-", 1)[1] for p in tmp_path.iterdir()] == ["my_step.reference"]


def test_compile_log_prints_time_per_pass(capsys):
    with ember.config.override(log="compile"):
        run_pipeline(_graph(), "cpu")
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(GRAPH_PIPELINES["cpu"])
    second = GRAPH_PIPELINES["cpu"][1].__name__
    assert lines[1].startswith(f"ember: pass {second} (cpu) in ") and "equations" in lines[0]


def test_verifier_names_the_pass_that_broke_the_graph(monkeypatch):
    def broken(graph: Graph) -> Graph:
        return graph.replace(eqns=graph.eqns[1:])

    monkeypatch.setitem(GRAPH_PIPELINES, "reference", [broken])
    with ember.config.override(verify=True):
        with pytest.raises(VerificationError, match=r"after pass 1 \(broken\): .*used before"):
            run_pipeline(_graph(), "reference")
    with ember.config.override(verify=False):
        run_pipeline(_graph(), "reference")


def test_optimize_off_returns_the_traced_graph(tmp_path):
    graph = _graph()
    with ember.config.override(optimize=False, dump_dir=str(tmp_path)):
        assert run_pipeline(graph, "cpu") is graph
    assert [p.name for p in next(tmp_path.iterdir()).iterdir()] == ["0000-input.txt"]


def test_unknown_backend():
    with pytest.raises(KeyError, match="no graph pipeline for backend 'tpu'"):
        run_pipeline(_graph(), "tpu")


def test_jit_on_reference_uses_the_pipeline(monkeypatch):
    seen = []
    monkeypatch.setattr(pipeline, "run_pipeline",
                        lambda graph, name, **kwargs: seen.append(name) or graph)
    jitted = ember.jit(lambda x: lax.sin(x), backend="reference")
    np.testing.assert_allclose(np.asarray(jitted(np.ones(2, np.float32))), np.sin(1.0), rtol=1e-6)
    assert seen == ["reference"]


def test_ember_dump_is_a_folder_or_a_switch(monkeypatch):
    for value, expected in [("1", "ember_dump"), ("true", "ember_dump"), ("0", None),
                            ("off", None), ("", None), ("dumps/here", "dumps/here")]:
        monkeypatch.setenv("EMBER_DUMP", value)
        assert Config().dump_dir == expected, value


def test_the_switch_dumps_into_the_working_directory_and_says_where(tmp_path, monkeypatch,
                                                                   capsys):
    monkeypatch.chdir(tmp_path)
    run_pipeline(_graph(), "reference")  # (a program compiled before, not dumped)
    with ember.config.override(dump_dir=DEFAULT_DUMP_DIR):
        run_pipeline(_graph(), "reference")
        run_pipeline(_graph(), "reference")
    said = capsys.readouterr().err
    assert said.count("compiler dumps go to") == 1 and str(tmp_path / "ember_dump") in said
    assert len(list((tmp_path / "ember_dump").iterdir())) == 2
