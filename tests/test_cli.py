"The `venus-nb` command: help on every option, plain text, config layers and round trips"
import argparse, json, os, re
from pathlib import Path
import pytest
from venus_nb import __version__
from venus_nb.cli import main, parser, stages
from venus_nb.terminal import plain
from venus_nb.trajectory import read_jsonl

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
    assert (tmp_path/'o/config.yaml').exists()

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
    for given in (bad, tmp_path/'missing.jsonl'):
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
