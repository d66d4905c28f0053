"""The `venus-nb` command: help on every option, plain text, config layers and round trips; a bad path, input or
setting is one line `venus-nb: error: ...` (fuzzed files and `--set` pairs too); a config that names code runs only
with --trust-code; `replay` without a ground truth or past the model's context."""
import argparse, json, os, re, html
from pathlib import Path
import pytest, pandas as pd, yaml
from hypothesis import given, settings, strategies as st, HealthCheck
from conftest import WORLD, cli_result as _cli, one_error as _one_error
from test_base import NAMES, FUZZ, well_typed, settings_maps
from test_igpo import _write, HOSTILE
from venus_nb import __version__
from venus_nb.cli import main, parser, stages, parse_sets, merged
from venus_nb.terminal import plain, CLIError
from venus_nb.trajectory import read_jsonl, to_record
from venus_nb.models import tiny_model

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = re.compile(r'\*\*|`|^#{1,6} |^\|.*\|$|\|-{3,}', re.M)   # bold, code spans, headings, table rows and rules

def _parsers(p:argparse.ArgumentParser):
    "The parser and every subcommand's parser, with their names"
    yield 'venus-nb', p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items(): yield name, sub

def test_every_option_and_command_has_help():
    missing = [f'{name} {a.option_strings or a.dest}' for name, p in _parsers(parser()) for a in p._actions
               if not isinstance(a, argparse._SubParsersAction) and not a.help]
    commands = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)][0]
    missing += [c.dest for c in commands._choices_actions if not c.help]
    assert not missing, missing
    assert {'sft', 'rollout', 'igpo', 'eval'} <= {n for n, _ in _parsers(parser())}

def test_version(capsys):
    with pytest.raises(SystemExit) as e: main(['--version'])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f'venus-nb {__version__}'

def test_plain_renders_markdown_as_text():
    md = '## 3. Clean: **22 of 24 kept** in `out`\n| a | bb |\n|---|---|\n| 100 | x |'
    assert plain(md).splitlines() == ['3. Clean: 22 of 24 kept in out', 'a    bb', '100  x']
    assert not MARKDOWN.search(plain(md))

def test_cheap_commands_print_plain_text(tmp_path, capsys):
    main(['synth', '--n', '30', '--out', str(tmp_path)])
    main(['clean', str(tmp_path/'trajectories.jsonl'), '--out', str(tmp_path/'clean'), '--judge', 'em'])
    main(['resample', str(tmp_path/'clean/cleaned.jsonl'), '--out', str(tmp_path/'sft.jsonl')])
    out = capsys.readouterr().out
    assert 'kept' in out and f'wrote {tmp_path/"sft.jsonl"}' in out   # the counts and where each output went
    assert '30 trajectories of ' in out and 'questions (qa.jsonl lists each once)' in out
    assert not MARKDOWN.search(out), MARKDOWN.search(out)

def test_settings_layers_defaults_file_flags_set(tmp_path):
    st = stages()['igpo']
    (tmp_path/'c.yaml').write_text('steps: 3\nlr: 2.0e-05\nrollout: {G: 2, max_turns: 4}\nquestions: from-file\n')
    d = st.settings(tmp_path/'c.yaml', {'questions': 'from-flag', 'policy': None},
                    ['rollout.G=5', 'lr=1e-5', 'betas=[0.8, 0.9]'])
    inputs, cfg = st.resolve(d)
    assert inputs['questions'] == 'from-flag' and inputs['policy'] == 'smollm2-135m'
    assert (cfg.steps, cfg.lr, cfg.betas, cfg.rollout.G, cfg.rollout.max_turns) == (3, 1e-5, (0.8, 0.9), 5, 4)

def test_unknown_keys_name_themselves_and_the_valid_ones(tmp_path, capsys):
    (tmp_path/'c.yaml').write_text('Gg: 3\n')
    with pytest.raises(SystemExit) as e: main(['rollout', '--config', str(tmp_path/'c.yaml'), '--questions', 'q.jsonl'])
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.splitlines()) == 1
    assert 'unknown setting Gg' in err and 'max_turns' in err and 'questions' in err
    from venus_nb.igpo import IGPOConfig
    from venus_nb.base import check_keys
    with pytest.raises(ValueError, match=r'unknown setting rollout\.Gx; valid in rollout: G, max_turns'):
        check_keys({'rollout': {'Gx': 1}}, IGPOConfig)

def _without_timings(path):
    "Trajectories of a file as JSON rows, wall-clock seconds left out"
    rows = [json.loads(l) for l in open(path)]
    for r in rows: r['meta'].pop('seconds', None)
    return rows

@pytest.fixture(scope='module')
def tiny_world(tmp_path_factory):
    "A folder with a tiny random model and a small generated world"
    from venus_nb.models import tiny_model
    d = tmp_path_factory.mktemp('cli')
    m, tok = tiny_model('llama')
    m.save_pretrained(d/'tiny')
    tok.save_pretrained(d/'tiny')
    main(['synth', '--n', '12', '--out', str(d/'world')])
    return d

def test_rollout_config_round_trip(tiny_world, capsys):
    d = tiny_world
    main(['rollout', '--policy', str(d/'tiny'), '--questions', str(d/'world'), '--limit', '2',
          '--engine', 'transformers', '--out', str(d/'r1'),
          '--set', 'G=2', '--set', 'max_turns=2', '--set', 'max_new_tokens=8', '--set', 'seed=3'])
    saved = d/'r1/config.yaml'
    main(['rollout', '--config', str(saved), '--out', str(d/'r2')])
    first, again = _without_timings(d/'r1/trajectories.jsonl'), _without_timings(d/'r2/trajectories.jsonl')
    assert len(first) == 4 and first == again
    a, b = (p.read_text().replace(str(p.parent), 'OUT') for p in (saved, d/'r2/config.yaml'))
    assert a == b and 'seed: 3' in a
    assert not MARKDOWN.search(capsys.readouterr().out)

@pytest.mark.slow
def test_sft_config_round_trip(tiny_world, tmp_path):
    "SFT twice from one saved config: the same weights"
    from safetensors.torch import load_file
    from venus_nb.trajectory import write_jsonl
    d = tiny_world
    short = sorted(read_jsonl(d/'world/trajectories.jsonl').trajectories, key=lambda t: len(t.turns))[:2]
    write_jsonl(short, tmp_path/'short.jsonl')
    main(['sft', '--data', str(tmp_path/'short.jsonl'), '--policy', str(d/'tiny'), '--out', str(tmp_path/'s1'),
          '--set', 'max_steps=2', '--set', 'grad_accum=1', '--set', 'backend=transformers', '--set', 'max_length=2048',
          '--set', 'lr=1e-3', '--set', 'save_steps=100'])
    main(['sft', '--config', str(tmp_path/'s1/config.yaml'), '--out', str(tmp_path/'s2')])
    w1, w2 = (load_file(next((tmp_path/s).glob('*.safetensors'))) for s in ('s1', 's2'))
    assert w1.keys() == w2.keys() and all((w1[k] == w2[k]).all() for k in w1)
    base = load_file(next((d/'tiny').glob('*.safetensors')))
    assert any(k in base and not (w1[k] == base[k]).all() for k in w1) or any('lora' in k for k in w1)   # it trained

def test_quieting_is_put_back(tmp_path):
    "The command quiets the libraries while it runs, and leaves the caller's environment and loggers as they were"
    import logging, os
    before = (os.environ.get('TORCH_LOGS'), os.environ.get('TQDM_DISABLE'), logging.getLogger('transformers').level)
    main(['synth', '--n', '5', '--out', str(tmp_path)])
    assert (os.environ.get('TORCH_LOGS'), os.environ.get('TQDM_DISABLE'),
            logging.getLogger('transformers').level) == before

@pytest.mark.slow
def test_a_failing_igpo_says_one_line_only(tmp_path):
    "torch, torchao, bitsandbytes and peft load on the way, each with its own warnings; stderr has only our error line"
    import subprocess, sys
    run = subprocess.run([sys.executable, '-m', 'venus_nb.cli', 'igpo', '--questions', str(tmp_path/'missing.jsonl'),
                          '--out', str(tmp_path/'o')],
                         cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**__import__('os').environ, 'PYTHONPATH': str(ROOT)})
    assert run.returncode == 1 and run.stderr.splitlines() == [
        f'venus-nb: error: {tmp_path/"missing.jsonl"}: no such file or folder'], run.stderr
    assert not (tmp_path/'o/config.yaml').exists()   # a missing input is found before the settings are saved

@pytest.mark.parametrize('command', ['sft', 'rollout', 'igpo', 'eval'])
def test_saved_settings_read_back_the_same(command, tmp_path):
    "Every field of every command's config survives config.yaml: tuples, None, floats like 1e-5, dates, nested configs"
    from venus_nb.cli import settings_of, save_settings
    st = stages()[command]
    sets = ['data=x.jsonl', 'lr=1e-5', 'max_length=null'] if command == 'sft' else \
           ['questions=q.jsonl', 'lr=3e-6', 'rollout.G=3', 'rollout.stop=[a, b]',
            'rewards.gamma=0.9'] if command == 'igpo' else \
           ['questions=q.jsonl', 'G=3', 'date=2026-01-02', 'stop=[a, b]', 'temperature=1']
    first = settings_of(*st.resolve(st.settings(None, {}, sets)))
    saved = save_settings(tmp_path/'config.yaml', command, first)
    again = settings_of(*st.resolve(st.settings(saved)))
    assert again == first and first.get('date', '2026-01-02') == '2026-01-02'

def test_quiet_libraries_turns_vllms_loading_bar_off_in_a_log_and_back():
    from venus_nb.cli import quiet_libraries
    from venus_nb.terminal import in_terminal
    from venus_nb.rollout import ENGINE_KW
    assert not in_terminal() and 'use_tqdm_on_load' not in ENGINE_KW
    with quiet_libraries(): assert ENGINE_KW == {'use_tqdm_on_load': False}
    assert ENGINE_KW == {}

# --- bad output folders and counts are refused before anything is made ------------------------------------------------

def _exits(argv, capsys)->str:
    "The one error line `main(argv)` exits 1 with"
    with pytest.raises(SystemExit) as e: main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 1 and len(err.splitlines()) == 1 and err.startswith('venus-nb: error: '), err
    return err

@pytest.mark.parametrize('command', ['rollout', 'igpo', 'eval', 'sft'])
def test_cli_non_utf8_out_is_refused_before_anything_is_made(command, tiny_world, tmp_path, capsys):
    "An --out that is not UTF-8 text (bytes 0xff on Linux) cannot go into config.yaml: one clear line, no folder"
    import os
    out = tmp_path/os.fsdecode(b'out-\xff')
    inputs = (['--data', str(tiny_world/'world/trajectories.jsonl')] if command == 'sft'
              else ['--questions', str(tiny_world/'world'), '--policy', str(tiny_world/'tiny')])
    err = _exits([command, *inputs, '--out', str(out)], capsys)
    assert 'not UTF-8' in err and "out-\\udcff" in err and not out.exists() and not list(tmp_path.iterdir())

@pytest.mark.parametrize('n', ['0', '-3'])
def test_cli_synth_without_questions_is_an_error(n, tmp_path, capsys):
    with pytest.raises(SystemExit) as e: main(['synth', '--n', n, '--out', str(tmp_path/'w')])
    assert e.value.code == 2 and 'expected a positive whole number' in capsys.readouterr().err
    assert not (tmp_path/'w').exists()

def test_cli_clean_of_an_unreadable_input_makes_no_folder(tmp_path, capsys):
    (bad := tmp_path/'bad.jsonl').write_bytes(b'\xff\xfe not json\n')
    for given in (bad, tmp_path/'missing.jsonl'):   # noqa: F402 (a path, not hypothesis' given)
        assert str(given) in _exits(['clean', str(given), '--out', str(tmp_path/'clean')], capsys)
        assert not (tmp_path/'clean').exists()
    assert str(bad) in _exits(['resample', str(bad), '--out', str(tmp_path/'sft/rows.jsonl')], capsys)
    assert not (tmp_path/'sft').exists()

# --- clean and resample: formats, judges, folders ---------------------------------------------------------------------

R1_ROLLOUT = {'question': 'Who founded Kestra?', 'answer': 'Oren Pike', 'gpt4o_output': 'True',
              'gen_text_store': ' Look it up.\n<|begin_of_query|> Kestra founder<|end_of_query|>\n'
                                '<|begin_of_documents|>\n(1)Kestra   Kestra was founded by Oren Pike.\n'
                                '<|end_of_documents|>\nFound it.</think>\n<answer>Oren Pike</answer>'}

def test_cli_a_file_of_another_format_says_a_few_lines_then_one_error(tmp_path, capsys):
    (f := tmp_path/'r1.jsonl').write_text(''.join(json.dumps(R1_ROLLOUT) + '\n' for _ in range(500)))
    with pytest.raises(SystemExit) as e: main(['clean', str(f), '--out', str(tmp_path/'clean')])
    out, err = capsys.readouterr()
    assert e.value.code == 1 and len(err.splitlines()) == 1 and '--format' in err and 'r1-searcher' in err, err
    assert len(out.splitlines()) == 4 and '497 more unreadable records (500 in all)' in out, out
    assert not (tmp_path/'clean').exists()
    main(['clean', str(f), '--out', str(tmp_path/'clean'), '--format', 'r1-searcher', '--judge', 'em'])
    assert len(read_jsonl(tmp_path/'clean'/'cleaned.jsonl').trajectories) == 500

def test_cli_a_judge_it_cannot_use_is_one_error_before_any_record_is_read(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv('VENUS_NB_JUDGE_URL', raising=False)
    missing = tmp_path/'missing.jsonl'   # never read: the judge is refused first
    err = _exits(['clean', str(missing), '--out', str(tmp_path/'clean'), '--judge', 'llm'], capsys)
    assert '--judge-url' in err and 'VENUS_NB_JUDGE_URL' in err and str(missing) not in err
    assert not (tmp_path/'clean').exists()

def test_cli_clean_with_the_llm_judge_and_a_plain_summary(tiny_world, tmp_path, capsys, scripted, loopback_only):
    scripted.script = 'extracted_final_answer: x\ncorrect: no'
    url = f'http://127.0.0.1:{scripted.server_port}/v1'
    main(['clean', str(tiny_world/'world/trajectories.jsonl'), '--out', str(tmp_path/'c'), '--judge', 'llm',
          '--judge-url', url])
    out = capsys.readouterr().out
    assert out.startswith(f'Clean (correctness filter: LLM judge Qwen3-235B-A22B-Instruct-2507 at {url}'), out
    assert 'None' not in out.splitlines()[0] and scripted.requests
    main(['clean', str(tiny_world/'world/trajectories.jsonl'), '--out', str(tmp_path/'c'), '--judge', 'none'])
    assert capsys.readouterr().out.startswith('Clean (no correctness filter): ')

def test_cli_resample_reads_the_folder_clean_wrote(tiny_world, tmp_path, capsys):
    main(['clean', str(tiny_world/'world/trajectories.jsonl'), '--out', str(tmp_path/'clean')])
    main(['resample', str(tmp_path/'clean'), '--out', str(tmp_path/'rows.jsonl')])
    cleaned = read_jsonl(tmp_path/'clean'/'cleaned.jsonl').trajectories
    assert len(read_jsonl(tmp_path/'rows.jsonl').trajectories) >= len(cleaned) > 0

def test_cli_an_out_ending_in_a_slash_is_a_folder(tiny_world, tmp_path, capsys):
    main(['resample', str(tiny_world/'world/trajectories.jsonl'), '--out', f'{tmp_path}/sft/'])
    assert (tmp_path/'sft').is_dir() and len(read_jsonl(tmp_path/'sft'/'sft.jsonl').trajectories) >= 12

@pytest.mark.skipif(not Path('/proc/self').is_dir(), reason='needs Linux /proc, where no file can be made')
def test_cli_an_unwritable_out_names_the_path_given(tiny_world, capsys):
    err = _exits(['resample', str(tiny_world/'world/trajectories.jsonl'), '--out', '/proc/rows.jsonl'], capsys)
    assert '/proc' in err and '.tmp' not in err
    assert capsys.readouterr().out == ''   # refused before the work

@pytest.mark.skipif(not hasattr(os, 'geteuid') or os.geteuid() != 0, reason='only root needs --allow-root')
def test_make_lab_runs_as_root():
    import subprocess
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(['make', '-n', 'lab'], cwd=root, capture_output=True, text=True)
    lab = [l for l in run.stdout.splitlines() if 'jupyter lab nbs' in l]
    assert lab and '--allow-root' in lab[-1], run.stdout + run.stderr

# ---------------------------------------------------------------------------------------------------------------------
# `venus-nb replay` without a ground truth, and with turns past the context

def _without_gt(tmp_path):
    rec = to_record(read_jsonl(WORLD/'trajectories.jsonl').trajectories[0])
    rec.pop('gt', None)
    rec.pop('answer', None)
    f = tmp_path/'no_gt.jsonl'
    f.write_text(json.dumps(rec) + '\n')
    return f

def test_cli_without_gt_names_both_options_and_no_scores_writes_the_turns(tmp_path, capsys, tiny_dir):
    f, page = _without_gt(tmp_path), tmp_path/'r.html'
    _one_error(*_cli(['replay', f, '--model', tiny_dir, '--out', page], capsys)[::2], 'trajectory 0 of',
               'no_gt.jsonl', 'no ground truth', '--gt TEXT', '--no-scores')
    assert not page.exists()
    code, out, err = _cli(['replay', f, '--no-scores', '--model', tmp_path/'no-such-model', '--out', page], capsys)
    assert code == 0 and 'not scored' in out and page.exists(), (out, err)   # no model loaded
    text = page.read_text()
    assert 'not scored</b>: turns only' in text and 'IG-Scale' not in text
    _one_error(*_cli(['replay', f, '--no-scores', '--gt', 'x', '--out', page], capsys)[::2], 'not both')

# --- turns IG could not score ---------------------------------------------------------------------------------------

def test_an_overlong_trajectory_reports_its_unscored_visits_on_the_page_and_in_the_output(tmp_path, capsys,
                                                                                         monkeypatch):
    m, tok = tiny_model('llama')
    t = next(t for t in read_jsonl(WORLD/'trajectories.jsonl').trajectories
             if sum(u.kind == 'visit' for u in t.turns) >= 2)
    m.config.max_position_embeddings = len(t.tokenize(tok).ids) // 2   # the later visits lie past it
    m.save_pretrained(tmp_path/'short')
    tok.save_pretrained(tmp_path/'short')
    f, page = tmp_path/'one.jsonl', tmp_path/'r.html'
    f.write_text(json.dumps(to_record(t)) + '\n')
    args = ['replay', f, '--model', tmp_path/'short', '--out', page, '--max-chars', 10**5]
    code, out, err = _cli(args, capsys)
    assert code == 0 and 'scoring' not in err, (out, err)   # not a terminal: no progress line
    window = f"past the model's context window ({m.config.max_position_embeddings:,} positions)"
    assert 'scored turns have no IG (marked “not scored” on the page)' in out and window in out
    assert '(--max-chars, now 100,000) scores them' in out
    n = int(re.search(r'(\d+) of the \d+ scored turns have no IG', out).group(1))
    text = page.read_text()
    assert f'{n} turn{"s" if n > 1 else ""} IG would score' in text
    assert text.count(f'not scored: {html.escape(window)}') == n   # in each such turn's header
    assert text.count(' · not scored</option>') == n   # and in the selector
    monkeypatch.setattr('venus_nb.cli.in_terminal', lambda: True)
    code, out, err = _cli(args, capsys)
    assert code == 0 and 'scoring trajectory 0 of' in err and 'visits' in err   # in a terminal: progress

# ---------------------------------------------------------------------------------------------------------------------
# The CLI: a bad path or input is one line `venus-nb: error: ...` and a non-zero exit, never a traceback


def test_replay_empty_file_and_index_out_of_range(tmp_path, capsys, tiny_dir):
    (tmp_path/'empty.jsonl').write_text('')
    _one_error(*_cli(['replay', tmp_path/'empty.jsonl', '--model', tiny_dir], capsys)[::2], 'empty.jsonl',
               'no readable trajectory')
    one = tmp_path/'one.jsonl'
    one.write_text(json.dumps(to_record(read_jsonl(WORLD/'trajectories.jsonl').trajectories[0])) + '\n')
    _one_error(*_cli(['replay', one, '--index', 3, '--model', tiny_dir], capsys)[::2], '--index 3', '1 trajectory')
    code, out, err = _cli(['replay', one, '--model', tiny_dir, '--out', tmp_path/'r.html'], capsys)
    assert code == 0 and (tmp_path/'r.html').exists() and 'error' not in err and 'wrote' in out

def test_missing_unreadable_and_unwritable_paths(tmp_path, capsys, monkeypatch):
    src = WORLD/'trajectories.jsonl'
    _one_error(*_cli(['clean', tmp_path/'nope.jsonl', '--out', tmp_path/'o'], capsys)[::2], 'nope.jsonl')
    _one_error(*_cli(['resample', tmp_path/'nope.jsonl', '--out', tmp_path/'o.jsonl'], capsys)[::2], 'nope.jsonl')
    blocker = tmp_path/'file'
    blocker.write_text('x')
    _one_error(*_cli(['clean', src, '--out', blocker/'sub'], capsys)[::2], 'sub')          # a folder under a file
    code, out, _ = _cli(['resample', src, '--out', tmp_path], capsys)   # a folder that is there: the file goes in it
    assert code == 0 and (tmp_path/'sft.jsonl').is_file() and f'wrote {tmp_path/"sft.jsonl"}' in out
    real_open = open
    def no_read(p, *a, **kw):
        if str(p).endswith('locked.jsonl'): raise PermissionError(13, 'Permission denied', str(p))
        return real_open(p, *a, **kw)
    locked = tmp_path/'locked.jsonl'
    locked.write_text(src.read_text())
    monkeypatch.setattr('builtins.open', no_read)
    _one_error(*_cli(['clean', locked, '--out', tmp_path/'o2'], capsys)[::2], 'locked.jsonl', 'Permission denied')

def test_read_only_output_is_one_error_line(tmp_path, capsys, monkeypatch):
    def read_only(*a, **kw): raise PermissionError(30, 'Read-only file system', str(tmp_path/'ro'/'.sft.jsonl.tmp'))
    monkeypatch.setattr('venus_nb.base.os.replace', read_only)
    _one_error(*_cli(['resample', WORLD/'trajectories.jsonl', '--out', tmp_path/'ro'/'sft.jsonl'], capsys)[::2],
               'Read-only file system')

def test_traceback_flag_shows_the_error(tmp_path):
    from venus_nb.cli import main
    from venus_nb.terminal import CLIError
    with pytest.raises(CLIError, match='no such file'):
        main(['--traceback', 'clean', str(tmp_path/'nope.jsonl'), '--out', str(tmp_path/'o')])

def test_demo_with_a_mistyped_data_path_is_an_error(tmp_path, capsys):
    code, out, err = _cli(['demo', '--data', tmp_path/'typo.jsonl', '--out', tmp_path/'out', '--stage1-only'], capsys)
    _one_error(code, err, 'typo.jsonl')
    assert 'generate' not in out

# ---------------------------------------------------------------------------------------------------------------------
# Fuzz: arbitrary bytes in, a report out; exit 0 or one clear error line

GOOD = (json.dumps(to_record(read_jsonl(WORLD/'trajectories.jsonl').trajectories[0])) + '\n').encode()
lines = st.lists(st.one_of(st.binary(max_size=60), st.just(GOOD), st.just(b'{"messages": [1]}\n'), st.just(b'[]\n'),
                           st.just(b'\xff\xfe\x00'), st.just(b'{"question": "q", "messages": []}\n')),
                 max_size=5).map(b''.join)

@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=lines, cmd=st.sampled_from(['clean', 'resample', 'replay']),
       fmt=st.sampled_from(['dr-venus', 'webdancer', 'react']))
def test_cli_fuzz(tmp_path_factory, capsys, tiny_dir, data, cmd, fmt):
    d = tmp_path_factory.mktemp('fuzz')
    f = d/'in.jsonl'
    f.write_bytes(data)
    args = {'clean': ['clean', f, '--out', d/'out', '--format', fmt],
            'resample': ['resample', f, '--out', d/'sft.jsonl'],
            'replay': ['replay', f, '--out', d/'r.html', '--format', fmt, '--model', tiny_dir]}[cmd]
    code, out, err = _cli(args, capsys)
    assert 'Traceback' not in out + err
    if code in (0, None): assert 'error' not in err and out.strip(), (out, err)   # stderr may hold a progress bar
    else: _one_error(code, err)

def test_clean_report_counts_unreadable_records(tmp_path, capsys):
    "Every record read is counted: 5 readable + 3 unreadable lines give input 8, 3 dropped at 'load' with their line"
    good = (WORLD/'trajectories.jsonl').read_text().splitlines()[:5]
    f = tmp_path/'mixed.jsonl'
    f.write_text('\n'.join(good[:2] + ['{"messages": [', 'not json'] + good[2:] + ['[[[[', '']) + '\n')
    code, out, err = _cli(['clean', f, '--out', tmp_path/'c'], capsys)
    assert code == 0, err
    report = pd.read_csv(tmp_path/'c'/'clean_report.csv')
    assert len(report) == 8 and (report.step == 'load').sum() == 3
    assert f'{f}:3:' in out and f'{f}:4:' in out and f'{f}:8:' in out

def test_replay_without_ground_truth_is_refused_or_given_one(tmp_path, capsys, tiny_dir):
    "No IG against a ground truth that is not there (the word 'None' was scored before): one error naming --gt"
    t = read_jsonl(WORLD/'trajectories.jsonl').trajectories[0]
    rec = to_record(t)
    rec.pop('gt', None)
    rec.pop('answer', None)
    f = tmp_path/'no_gt.jsonl'
    f.write_text(json.dumps(rec) + '\n')
    assert read_jsonl(f).trajectories[0].gt is None
    _one_error(*_cli(['replay', f, '--model', tiny_dir, '--out', tmp_path/'r.html'], capsys)[::2], 'no_gt.jsonl',
               'no ground truth', '--gt')
    assert not (tmp_path/'r.html').exists()
    code, out, err = _cli(['replay', f, '--model', tiny_dir, '--out', tmp_path/'r.html', '--gt', t.gt], capsys)
    assert code == 0 and (tmp_path/'r.html').exists() and 'wrote' in out
    from venus_nb.scoring import gt_logps
    m, tok = tiny_model('llama')
    with pytest.raises(ValueError, match='has no ground truth'): gt_logps(m, tok, read_jsonl(f).trajectories[0])

def test_replay_says_which_turns_lie_past_the_context(tmp_path, capsys):
    "Visits past the model's positions are counted in the command's output, with the fix"
    from venus_nb.cli import unscored_note
    from venus_nb.rewards import GTLogps
    m, tok = tiny_model('llama')
    note = unscored_note(GTLogps(-3.0, [None, -2.0, None, None], cut=2), None, m, 'tiny')
    assert note.startswith('2 of the 3 scored turns have no IG') and '--max-chars' in note
    assert unscored_note(GTLogps(-3.0, [None, -2.0], cut=0), None, m, 'tiny') is None
    t = next(t for t in read_jsonl(WORLD/'trajectories.jsonl').trajectories
             if sum(u.kind == 'visit' for u in t.turns) >= 2)
    m.config.max_position_embeddings = len(t.tokenize(tok).ids) // 2   # the later visits lie past it
    m.save_pretrained(tmp_path/'short')
    tok.save_pretrained(tmp_path/'short')
    f = tmp_path/'one.jsonl'
    f.write_text(json.dumps(to_record(t)) + '\n')
    code, out, err = _cli(['replay', f, '--model', tmp_path/'short', '--out', tmp_path/'r.html', '--max-chars', 10**5],
                          capsys)
    assert code == 0 and 'scored turns have no IG' in out and 'wrote' in out, (out, err)

# ---------------------------------------------------------------------------------------------------------------------
# Fuzzing `--set` and the settings: well typed or one CLI error

set_pairs = st.lists(st.one_of(st.tuples(st.lists(st.sampled_from(NAMES + ['', 'x']), min_size=1, max_size=3)
                                         .map('.'.join),
                                         st.sampled_from(['4', '1e-5', 'true', 'null', '[1, 4]', '{a: 1}', 'x', '', '[',
                                                          'nan', '9' * 400]))
                               .map('='.join), st.text(max_size=12)), max_size=5)

@FUZZ
@given(name=st.sampled_from(['igpo', 'rollout', 'eval']), pairs=set_pairs, d=settings_maps)
def test_any_set_pairs_and_settings_resolve_well_typed_or_are_one_cli_error(name, pairs, d):
    st_ = stages()[name]
    try: inputs, cfg = st_.resolve(merged(merged(st_.defaults(), {'questions': 'q.jsonl'}),
                                          merged(d, parse_sets(pairs))))
    except CLIError: return
    well_typed(cfg)

def test_known_bad_cli_settings_are_one_error_naming_the_key(tmp_path, capsys):
    """The CLI's failures the fuzzing found: a --set under a key already set to a value, a nested config given a value,
    wrong types, unreadable files"""
    with pytest.raises(CLIError, match='rollout is set to a value'): parse_sets(['rollout=3', 'rollout.G=4'])
    st_ = stages()['igpo']
    for d, key in [({'rollout': 3}, 'rollout: expected a mapping'),
                   ({'rollout': {'G': 'four'}}, 'rollout.G: expected a whole number'),
                   ({'steps': True}, 'steps: expected a whole number'), ({'betas': [0.9, 'x']}, r'betas\[1\]'),
                   ({'lr': 'nan'}, 'lr: expected a finite number')]:
        with pytest.raises(CLIError, match=key):
            st_.resolve(merged(merged(st_.defaults(), {'questions': 'q.jsonl'}), d))
    for raw in (b'\x80', b'[' * 100_000, b'steps: ' + b'9' * 5000):
        (tmp_path/'c.yaml').write_bytes(raw)
        with pytest.raises(SystemExit):
            main(['igpo', '--config', str(tmp_path/'c.yaml'), '--questions', 'q.jsonl', '--out', str(tmp_path/'o')])
        err = capsys.readouterr().err
        assert err.startswith('venus-nb: error:') and 'c.yaml' in err and '--traceback' not in err, err

# ---------------------------------------------------------------------------------------------------------------------
# A config that names code runs none of it without --trust-code

@pytest.mark.parametrize('name', HOSTILE)
def test_the_cli_refuses_a_config_that_names_code(tmp_path, name, capsys):
    f = _write(tmp_path/'c.yaml', {'steps': 2, 'judge': {'callable': name}, 'questions': str(tmp_path/'q.jsonl')})
    for argv in (['igpo', '--config', str(f)], ['igpo', '--questions', 'q.jsonl', '--set', f'judge.callable={name}']):
        with pytest.raises(SystemExit) as e: main(argv + ['--out', str(tmp_path/'out')])
        err = capsys.readouterr().err
        assert e.value.code == 1 and 'names code to import and call' in err and '--trust-code' in err, err
    assert not (tmp_path/'out').exists()   # refused before anything was written

def test_the_cli_with_trust_code_gets_past_the_judge(tmp_path, capsys):
    (tmp_path/'q.jsonl').write_text(json.dumps({'question': 'q?', 'answer': 'a'}) + '\n')
    (tmp_path/'corpus.jsonl').write_text(json.dumps({'id': 'd', 'title': 't', 'text': 'a page'}) + '\n')
    f = _write(tmp_path/'c.yaml', {'steps': 2, 'judge': {'callable': 'test_igpo.strict_judge'},
                                   'questions': str(tmp_path/'q.jsonl'), 'policy': str(tmp_path/'no-model')})
    with pytest.raises(SystemExit): main(['igpo', '--config', str(f), '--trust-code', '--out', str(tmp_path/'out')])
    err = capsys.readouterr().err
    # stopped at the missing policy, not at the judge
    assert 'no-model' in err and 'names code' not in err, err
    assert (yaml.safe_load((tmp_path/'out'/'config.yaml').read_text())['judge']
            == {'callable': 'test_igpo.strict_judge'})

# --- options and inputs checked before anything runs or is written ------------------------------------------------

def test_synth_seed_and_out_are_checked(tmp_path, capsys):
    "A negative seed would make another seed's world; an --out that is a file is said as the other commands say it"
    with pytest.raises(SystemExit) as e: main(['synth', '--n', '3', '--seed', '-1', '--out', str(tmp_path/'w')])
    assert e.value.code == 2 and 'expected a whole number of at least 0' in capsys.readouterr().err
    (f := tmp_path/'afile').write_text('x')
    assert 'is a file, not a folder' in _exits(['synth', '--n', '3', '--out', str(f)], capsys)

def test_replay_max_chars_is_not_negative(tmp_path, capsys):
    with pytest.raises(SystemExit) as e: main(['replay', str(tmp_path/'t.jsonl'), '--no-scores', '--max-chars', '-5'])
    assert e.value.code == 2 and 'expected a whole number of at least 0' in capsys.readouterr().err

def test_clean_min_score_is_one_a_judge_can_reach(tiny_world, tmp_path, capsys):
    data = str(tiny_world/'world/trajectories.jsonl')
    assert 'the judges score from 0 to 1, got 7' in _exits(['clean', data, '--out', str(tmp_path/'c'), '--judge', 'em',
                                                           '--min-score', '7'], capsys)
    assert 'add --judge em, f1 or llm' in _exits(['clean', data, '--out', str(tmp_path/'c'), '--min-score', '0.5'],
                                                capsys)
    assert not (tmp_path/'c').exists()

@pytest.mark.parametrize('ks', ['abc', '0', '-1', '[]', '[1, 0]'])
def test_eval_ks_is_checked_before_a_rollout(ks, tiny_world, tmp_path, capsys, monkeypatch):
    "A bad ks stops eval before the policy loads (it was found after every rollout, which were then lost)"
    import venus_nb.cli as cli
    def no_engine(*a, **k): raise AssertionError('the policy loaded before ks was checked')
    monkeypatch.setattr(cli, 'policy_engine', no_engine)
    err = _exits(['eval', '--questions', str(tiny_world/'world'), '--policy', str(tiny_world/'tiny'),
                  '--out', str(tmp_path/'e'), '--set', f'ks={ks}'], capsys)
    assert 'ks: expected whole numbers of at least 1' in err

def test_a_run_with_a_missing_input_leaves_the_earlier_config(tiny_world, tmp_path, capsys):
    "config.yaml beside an earlier run's outputs is not overwritten by a run whose input does not exist"
    out = tmp_path/'ro'
    out.mkdir()
    (out/'config.yaml').write_text('G: 3\n')
    for command, named in (('rollout', ['--questions', str(tmp_path/'none.jsonl')]),
                           ('sft', ['--data', str(tmp_path/'none.jsonl')]),
                           ('rollout', ['--questions', str(tiny_world/'world'), '--corpus', str(tmp_path/'none')])):
        assert 'none' in _exits([command, *named, '--out', str(out), '--set', 'seed=7'] if command == 'rollout'
                                else [command, *named, '--out', str(out)], capsys)
        assert (out/'config.yaml').read_text() == 'G: 3\n'
    assert 'questions: expected the path of a file' in _exits(
        ['rollout', '--out', str(out), '--set', 'questions=[1]'], capsys)

def test_experiment_config_errors_are_one_line(tmp_path, capsys):
    (bad := tmp_path/'exp.yaml').write_text('seeds: abc\n')
    err = _exits(['experiment', '--config', str(bad)], capsys)
    assert 'seeds' in err and 'traceback' not in err
