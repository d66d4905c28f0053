"""Files under hostile sizes and races: JSON arrays read within the record cap, cassettes appended (not rewritten) per
request, and writes that two processes can race on without a torn file or an error."""
import asyncio, json, multiprocessing as mp, os, time, tracemalloc, warnings
from pathlib import Path
import httpx, pytest
from venus_nb.base import LoadError, MAX_RECORD_BYTES, atomic_open, read_records, write_atomic
from venus_nb.corpus import load_corpus
from venus_nb.web import Cassette
from venus_nb.synth import SynthData, write_world

MB = 1 << 20

def sparse(path:Path, head:bytes, size:int)->Path:
    "`path` holding `head`, then NUL bytes up to `size` that take no disk space"
    with open(path, 'wb') as f:
        f.write(head)
        f.truncate(size)
    return path

def peak_mb(f)->tuple:
    "What `f()` returns (or raises), and the most memory Python held while it ran, in MiB"
    tracemalloc.start()
    try:
        try: out = f()
        except Exception as e: out = e
        return out, tracemalloc.get_traced_memory()[1] / MB
    finally: tracemalloc.stop()

# ---- JSON arrays are read a record at a time, each record within the cap

def test_json_array_over_the_cap_is_never_read_whole(tmp_path):
    big = sparse(tmp_path/'big.json', b'[{"id": "a", "title": "A", "text": "first"}, {"id": "b", "text": "',
                 4 * MAX_RECORD_BYTES)
    out, peak = peak_mb(lambda: read_records(big, array=True))
    assert isinstance(out, ValueError) and 'big.json: not a valid JSON array' in str(out), out
    assert peak < 16, f'{peak:.0f} MiB held to read a {big.stat().st_size / MB:.0f} MiB array'
    out, peak = peak_mb(lambda: load_corpus(big))
    assert isinstance(out, ValueError) and 'big.json' in str(out) and peak < 16, (out, peak)

def test_json_array_record_over_the_cap_is_a_load_error_naming_the_file_and_the_cap(tmp_path):
    p = tmp_path/'long.json'
    p.write_text(json.dumps([{'id': 'a', 'text': 'short'}, {'id': 'b', 'text': 'x' * 5000},
                             {'id': 'c', 'text': 'never read'}]))
    kept, errors = read_records(p, array=True, max_line_bytes=1000)
    assert kept == [{'id': 'a', 'text': 'short'}]
    assert (len(errors) == 1 and errors[0].source == str(p) and errors[0].index == 1
            and '1,000 bytes' in errors[0].reason), errors

def test_json_array_streamed_reads_like_json_loads(tmp_path):
    recs = [{'n': i, 'text': 'café ☃ 😀 ' * (i % 7), 'f': [1.5e3, -2, None, True, False, {'x': 'a\\"b\\u00e9'}]}
            for i in range(3000)]
    for i, text in enumerate([json.dumps(recs), json.dumps(recs, indent=3, ensure_ascii=False),
                              '\n  ' + json.dumps(recs, separators=(',', ':'))]):
        p = tmp_path/f'{i}.json'
        p.write_bytes(text.encode())   # across many 64 KiB chunks, cut anywhere
        assert read_records(p, array=True) == (recs, [])
    for text in ['[]', ' [ ] \n', '[1, 2.5, "x", null, -0, 1e400]']:
        (p := tmp_path/'s.json').write_text(text)
        assert read_records(p, array=True) == (json.loads(text), [])
    (p := tmp_path/'bom.json').write_bytes(b'\xef\xbb\xbf[{"n": 1}]')
    assert read_records(p, array=True) == ([{'n': 1}], [])
    (p := tmp_path/'deep.json').write_text('[{"n": 1}, ' + '[' * 150 + ']' * 150 + ', {"n": 2}]')
    kept, errors = read_records(p, array=True)
    assert kept == [{'n': 1}, {'n': 2}] and [e.index for e in errors] == [1] and 'deeper than 100' in errors[0].reason
    for bad in ['[1, 2,]', '[1 2]', '[1, 2] 3', '[1, 2', '[{"n": 1}, tru', '["a\x00"]', '[1, 2]]']:
        (p := tmp_path/'bad.json').write_text(bad)
        with pytest.raises(ValueError, match='bad.json: not a valid JSON array'): read_records(p, array=True)

# ---- cassettes are appended one line per request

def record(tape:Path, n:int):
    "Record `n` requests (2 KiB bodies) through a `Cassette` into `tape`"
    inner = httpx.MockTransport(lambda req: httpx.Response(200, content=b'w' * 2048,
                                                           headers={'content-type': 'text/plain'}))
    async def go():
        async with httpx.AsyncClient(transport=Cassette(tape, inner=inner)) as c:
            for i in range(n): await c.get(f'https://example.org/page/{i}')
    asyncio.run(go())

def written_bytes()->int:
    "Bytes this process has handed to `write` so far"
    return int(next(l for l in Path('/proc/self/io').read_text().splitlines() if l.startswith('wchar')).split()[1])

@pytest.mark.skipif(not Path('/proc/self/io').exists(), reason='counts written bytes with /proc/self/io (Linux)')
def test_cassette_recording_writes_each_request_once(tmp_path):
    tape = tmp_path/'tape.jsonl'
    before = written_bytes()
    record(tape, 60)
    cost = written_bytes() - before
    assert cost < 2 * tape.stat().st_size, f'{cost:,} bytes written for a {tape.stat().st_size:,}-byte cassette'

def test_cassette_cut_last_line_then_recording_goes_on(tmp_path):
    tape = tmp_path/'tape.jsonl'
    record(tape, 3)
    whole = tape.read_bytes()
    tape.write_bytes(whole[:-40])   # killed while writing its last line
    record(tape, 2)                                               # pages 0 and 1 again, on lines of their own
    with pytest.warns(RuntimeWarning, match='1 unreadable line'): cas = Cassette(tape)
    assert [(e.index, e.reason.split(':')[0]) for e in cas.errors] == [(3, 'not JSON')]
    assert (sorted((k.split()[1], len(v)) for k, v in cas.replies.items())
            == [('https://example.org/page/0', 2), ('https://example.org/page/1', 2)])

# ---- writes: unique temporary files, fsynced, renamed; two writers never tear a file

SIZE = 256 * 1024

def _writer(path, k, n, errors):
    "Write `path` `n` times, each time whole with one byte repeated (the byte says which writer); errors go to `errors`"
    for i in range(n):
        try: write_atomic(path, bytes([65 + k]) * (SIZE + 4096 * (i % 7)))
        except Exception as e:
            errors.put(f'{type(e).__name__}: {e}')
            return

@pytest.mark.skipif('fork' not in mp.get_all_start_methods(), reason='the writers are forked')
def test_two_processes_writing_one_file_leave_one_whole_version(tmp_path):
    path, ctx = tmp_path/'shared.bin', mp.get_context('fork')
    errors = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(path, k, 150, errors)) for k in range(2)]
    for p in procs: p.start()
    seen = set()
    while any(p.is_alive() for p in procs):
        try: data = path.read_bytes()
        except FileNotFoundError: continue
        if data: seen.add((len(set(data)), (len(data) - SIZE) % 4096))
    for p in procs: p.join()
    errs = [errors.get(timeout=1) for _ in range(errors.qsize())]
    data = path.read_bytes()
    assert errs == [] and [p.exitcode for p in procs] == [0, 0], errs
    assert len(set(data)) == 1 and (len(data) - SIZE) % 4096 == 0 and seen <= {(1, 0)}, seen
    assert [f.name for f in tmp_path.iterdir()] == ['shared.bin']   # no temporary file left behind

def test_atomic_open_fsyncs_before_the_rename_and_cleans_up(tmp_path, monkeypatch):
    calls, real_replace, real_fsync = [], os.replace, os.fsync
    monkeypatch.setattr(os, 'fsync', lambda fd: calls.append('fsync') or real_fsync(fd))
    monkeypatch.setattr(os, 'replace', lambda a, b: calls.append('replace') or real_replace(a, b))
    write_atomic(tmp_path/'a.txt', 'text')
    assert calls[:2] == ['fsync', 'replace'] and (tmp_path/'a.txt').read_text() == 'text'
    with pytest.raises(KeyError):
        with atomic_open(tmp_path/'a.txt') as f:
            f.write('half')
            raise KeyError('boom')
    assert [f.name for f in tmp_path.iterdir()] == ['a.txt'] and (tmp_path/'a.txt').read_text() == 'text'

def test_write_world_keeps_the_old_files_when_a_write_fails(tmp_path):
    world = SynthData([{'id': 'd', 'text': 'a page'}], [{'id': 'q', 'question': 'q?', 'answer': 'a'}],
                      [{'question': 'q?', 'n': i} for i in range(500)])
    paths = write_world(world, tmp_path)
    old = {n: p.read_bytes() for n, p in paths.items()}
    world.records.insert(250, {'not': object()})   # json cannot write it: the write fails half way
    with pytest.raises(TypeError): write_world(world, tmp_path)
    assert {n: p.read_bytes() for n, p in paths.items()} == old
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted(p.name for p in paths.values())

def test_write_verl_sft_keeps_the_old_files_when_a_write_fails(tmp_path, monkeypatch):
    pytest.importorskip('verl', reason='verl is not installed: `make verl-test` runs this in .venv-verl')
    import pandas as pd
    from venus_nb import verl as vv
    monkeypatch.setattr(vv, 'verl_sft_frame',
                        lambda *a, **k: pd.DataFrame({'messages': [[{'role': 'user', 'content': 'q'}]]}))
    monkeypatch.setattr(vv, 'sft_chat_template', lambda tok: '{{ messages }}')
    out = vv.write_verl_sft([], tmp_path, None)
    old = {n: (out/n).read_bytes() for n in ('train.parquet', 'sft.yaml')}
    def half_then_fail(self, f, *a, **k):
        (open(f, 'wb') if isinstance(f, (str, Path)) else f).write(b'PAR1 half')
        raise OSError('disk full')
    monkeypatch.setattr(pd.DataFrame, 'to_parquet', half_then_fail)
    with pytest.raises(OSError): vv.write_verl_sft([], tmp_path, None)
    assert {n: (out/n).read_bytes() for n in old} == old

# ---------------------------------------------------------------------------------------------------------------------
# JSON read on resume goes through the capped reader: a clear ValueError naming the file, never a crash or a huge read

DEEP = '[' * 100_000 + ']' * 100_000

def _big(path:Path)->Path:
    "A valid JSON object padded past the 64 MB cap"
    from venus_nb.base import MAX_RECORD_BYTES
    with open(path, 'w') as f:
        f.write('{}')
        f.write(' ' * (MAX_RECORD_BYTES + 1))
    return path

@pytest.mark.parametrize('text', ['[1]', '"x"', DEEP, None], ids=['list', 'string', 'deep', 'over-the-cap'])
def test_resume_json_is_bounded(tmp_path, text):
    from venus_nb.checkpoints import check_json
    from venus_nb.experiment import ExperimentConfig, saved_config_changes, check_resume
    for name in ('state.json', 'config.json'):
        p = tmp_path/name
        _big(p) if text is None else p.write_text(text)
        with pytest.raises(ValueError, match=name + ('' if text else '.* over ')): check_json(p, 'step')
    cfg = ExperimentConfig(igpo={}, output_dir=str(tmp_path))
    for check in (saved_config_changes, check_resume):
        with pytest.raises(ValueError, match='config.json'): check(tmp_path, cfg)
