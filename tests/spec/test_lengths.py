"""Length sources of an input stream: seeded and clipped draws, length files, CSV and Parquet columns,
text lengths by whitespace and by a local tokenizer."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sweeper.spec import lengths as workloads
from sweeper.spec.workload import FileLengths, TextLengths, WorkloadSpec


def lengths_spec(**kw) -> object:
    return WorkloadSpec(lengths=kw).lengths


def test_fixed_uniform_normal_lognormal_are_seeded_and_clipped() -> None:
    assert workloads.draw_lengths(lengths_spec(kind="fixed", length=7), 5, seed=0) == [7] * 5
    uni = lengths_spec(kind="uniform", min_len=10, max_len=20)
    a = workloads.draw_lengths(uni, 500, seed=1)
    assert a == workloads.draw_lengths(uni, 500, seed=1)
    assert a != workloads.draw_lengths(uni, 500, seed=2)
    assert min(a) == 10 and max(a) == 20  # both ends inclusive
    normal = workloads.draw_lengths(lengths_spec(kind="normal", mean=50, std=40, min_len=30, max_len=60), 2000, 0)
    assert min(normal) == 30 and max(normal) == 60 and all(isinstance(x, int) for x in normal)
    ln = lengths_spec(kind="lognormal", mu=math.log(180), sigma=0.6, min_len=16, max_len=512)
    drawn = workloads.draw_lengths(ln, 4000, seed=0)
    assert min(drawn) >= 16 and max(drawn) == 512
    assert abs(np.median(drawn) - 180) < 10


def test_length_file_one_per_line_with_comments_sampled_or_replayed(tmp_path: Path) -> None:
    f = tmp_path / "lengths.txt"
    f.write_text("# header\n5\n\n900\n7\n")
    assert list(workloads.read_length_file(f)) == [5, 900, 7]
    replay = FileLengths(kind="file", path=str(f), order="replay", max_len=100)
    assert workloads.draw_lengths(replay, 7, seed=3) == [5, 100, 7, 5, 100, 7, 5]  # cycles, truncated
    sampled = workloads.draw_lengths(FileLengths(kind="file", path=str(f)), 50, seed=3)
    assert set(sampled) <= {5, 900, 7} and sampled == workloads.draw_lengths(
        FileLengths(kind="file", path=str(f)), 50, seed=3)
    f.write_text("5\n3.5\n")
    with pytest.raises(workloads.WorkloadError, match=r"entry 2 is 3\.5"):
        workloads.read_length_file(f)
    f.write_text("5\nabc\n")
    with pytest.raises(workloads.WorkloadError, match="'abc' is not a length"):
        workloads.read_length_file(f)


def test_length_columns_from_csv_and_parquet(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("id,n_tokens\n1,12\n2,30\n")
    assert list(workloads.read_length_file(csv, "n_tokens")) == [12, 30]
    with pytest.raises(workloads.WorkloadError, match="columns: id, n_tokens"):
        workloads.read_length_file(csv, "len")
    with pytest.raises(workloads.WorkloadError, match="say which with 'column'"):
        workloads.read_length_file(csv)
    pqf = tmp_path / "t.parquet"
    pq.write_table(pa.table({"len": [3, 4, 5]}), pqf)
    assert list(workloads.read_length_file(pqf)) == [3, 4, 5]  # the only column
    pq.write_table(pa.table({"len": [3, None]}), pqf)
    with pytest.raises(workloads.WorkloadError, match="entry 2 is None"):
        workloads.read_length_file(pqf, "len")


def test_text_lengths_by_whitespace_and_by_a_local_tokenizer(tmp_path: Path) -> None:
    text = tmp_path / "corpus.txt"
    text.write_text("the cat sat\n\n  the cat sat on the mat  \nmat\n")
    assert list(workloads.text_lengths(text)) == [3, 6, 1]
    from transformers import BertTokenizer

    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat"]))
    tok_dir = tmp_path / "tok"
    BertTokenizer(vocab_file=str(vocab)).save_pretrained(tok_dir)
    src = TextLengths(kind="text", path=str(text), tokenizer=str(tok_dir), order="replay")
    assert workloads.draw_lengths(src, 3, seed=0) == [5, 8, 3]  # words + [CLS] and [SEP]
    assert "tokenizer" in workloads.describe(src)
    with pytest.raises(workloads.WorkloadError, match="cannot load"):
        workloads.text_lengths(text, str(tmp_path))


def test_descriptions_name_the_parameters() -> None:
    ln = lengths_spec(kind="lognormal", mu=5.193, sigma=0.6, min_len=16, max_len=512)
    assert workloads.describe(ln) == "lognormal(mu=5.193, sigma=0.6; median 180) clipped to [16, 512]"
    assert workloads.describe(lengths_spec(kind="uniform", min_len=1, max_len=9)) == "uniform[1, 9]"
