"""The results page is generated: benchmarks/RESULTS.md is exactly what benchmarks/results.py makes of the records in
benchmarks/data/results.jsonl, every record is well formed and in run order, each row shows its figure's newest
record, bad records and bad additions are refused naming the field and value, and benchmarks/ holds one results
page and nothing named after a date."""
from __future__ import annotations

import json
import re

import pytest

from repo_scripts import ROOT, load_script

results = load_script("benchmarks/results.py")

BASE = {"suite": "demo", "figure": "epoch-vs-mmap", "vs": "the np.memmap loader", "what": "demo epoch",
        "ratio": 5.0, "ratio_of": "mmap s/epoch / gpuio s/epoch", "gpuio": "1.0 s/epoch",
        "reference": "mmap 5.0 s/epoch", "device": "NVIDIA H100 80GB HBM3", "commit": "abc1234",
        "date": "2026-11-25", "command": "bash scripts/gpu.sh demo", "target": ">= 3"}


def write(path, *recs):
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    return path


def test_committed_page_is_what_the_records_give():
    records = results.load()
    assert len(records) >= 300  # the archive's figures are all there
    assert results.check(records) == "", "run `python -m benchmarks.results` and commit benchmarks/RESULTS.md"


def test_check_command_fails_on_a_stale_page(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "RESULTS.md"
    stale.write_text(results.PAGE.read_text().replace("# gpuio results", "# gpuio results (edited by hand)"))
    monkeypatch.setattr(results, "PAGE", stale)
    assert results.main(["--check"]) == 1
    assert "edited by hand" in capsys.readouterr().err


def test_every_suite_with_records_is_shown_and_every_figure_once():
    records = results.load()
    page = results.PAGE.read_text()
    for suite in {r["suite"] for r in records}:
        assert f"## {results.SUITES[suite][0]}" in page
    rows = [ln for ln in page.splitlines() if ln.startswith("| ") and not ln.startswith("| gpuio vs")]
    assert len(rows) == len(results.latest(records))


def test_the_newest_record_of_a_figure_is_shown_with_its_run(tmp_path):
    old = dict(BASE, ratio=4.0, date="2026-11-23", commit="1111111", command="old command")
    new = dict(BASE, ratio=6.25, date="2026-11-26", commit="2222222", command="new command")
    records = results.load(write(tmp_path / "r.jsonl", old, new))
    page = results.render(records)
    row = next(ln for ln in page.splitlines() if ln.startswith("| the np.memmap loader"))
    assert "**6.25**" in row and "2222222" in row and ">= 3: met" in row and "| 2 |" in row
    assert "`new command`" in page and "old command" not in page and "1111111" not in page
    assert "6.25" in results.history(records, "demo", "epoch-vs-mmap") and "4.00" in results.history(
        records, "demo", "epoch-vs-mmap")


@pytest.mark.parametrize("change,named", [
    ({"ratio": "fast"}, "ratio 'fast'"), ({"ratio": -1}, "ratio -1"), ({"date": "2026-13-01"}, "date '2026-13-01'"),
    ({"suite": "nope"}, "suite 'nope'"), ({"commit": "HEAD"}, "commit 'HEAD'"), ({"target": "3 x"}, "target '3 x'"),
    ({"figure": "Epoch vs mmap"}, "figure 'Epoch vs mmap'"), ({"colour": "red"}, "unknown field(s) colour"),
    ({"source": "docs/no-such-file.md"}, "source 'docs/no-such-file.md'"), ({"device": ""}, "device ''")])
def test_a_bad_record_is_refused_naming_line_field_and_value(tmp_path, change, named):
    path = write(tmp_path / "r.jsonl", BASE, dict(BASE, **change))
    with pytest.raises(results.RecordError, match=re.escape(named)) as e:
        results.load(path)
    assert "r.jsonl:2" in str(e.value)


def test_records_keep_run_order_and_a_figure_its_meaning(tmp_path):
    with pytest.raises(results.RecordError, match="before the line above"):
        results.load(write(tmp_path / "a.jsonl", BASE, dict(BASE, date="2026-11-21")))
    with pytest.raises(results.RecordError, match="ratio_of .* differs"):
        results.load(write(tmp_path / "b.jsonl", BASE, dict(BASE, ratio_of="gpuio / mmap")))
    with pytest.raises(results.RecordError, match="missing field"):
        results.load(write(tmp_path / "c.jsonl", {k: v for k, v in BASE.items() if k != "command"}))


def test_met_reads_the_target():
    assert [results.met(dict(BASE, ratio=r, target=t)) for r, t in
            [(3.0, ">= 3"), (2.9, ">= 3"), (1.2, "<= 1.2"), (1.21, "<= 1.2"), (1.0, "> 1")]] == \
        ["met", "not met", "met", "not met", "not met"]
    assert results.met({k: v for k, v in BASE.items() if k != "target"}) == ""


def test_add_appends_a_run_of_a_known_figure_and_refuses_an_older_date(tmp_path):
    path = write(tmp_path / "r.jsonl", BASE)
    records = results.load(path)
    rec = results.add(records, {"suite": "demo", "figure": "epoch-vs-mmap", "ratio": 7.1, "gpuio": "0.6 s/epoch",
                                "reference": "mmap 4.3 s/epoch", "device": "NVIDIA H200", "commit": "767e65b",
                                "date": "2026-11-26", "command": "bash scripts/gpu.sh demo"}, path)
    assert rec["vs"] == BASE["vs"] and rec["target"] == ">= 3"  # taken from the figure's last record
    assert [r["ratio"] for r in results.load(path)] == [5.0, 7.1]
    before = path.read_text()
    with pytest.raises(results.RecordError, match="before the line above"):
        results.add(results.load(path), dict(rec, date="2026-11-20"), path)
    assert path.read_text() == before and not (tmp_path / "r.jsonl.new").exists()


def test_benchmarks_holds_one_results_page_and_nothing_named_after_a_date():
    names = [p.name for p in (ROOT / "benchmarks").iterdir()]
    assert [n for n in names if n.startswith("RESULTS")] == ["RESULTS.md"]
    dated = [str(p.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("*")
             if re.search(r"20\d\d-\d\d-\d\d", p.name)]
    assert not dated, dated
    assert sorted(p.name for p in (ROOT / "benchmarks" / "data").iterdir()) == ["results.jsonl"]


def test_every_source_and_run_key_on_the_page_resolves():
    page = results.PAGE.read_text()
    for link in re.findall(r"\]\((\.\./[^)]+)\)", page):
        assert (results.PAGE.parent / link).resolve().exists(), link
