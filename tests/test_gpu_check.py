"bench/gpu_check.py: the dry run writes every figure, the full shape is Qwen3-4B's, no GPU is an error."
import importlib.util, json, os, subprocess, sys
from pathlib import Path
import pytest, torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT/'bench'/'gpu_check.py'

def gpu_check():
    "The bench script as a module"
    spec = importlib.util.spec_from_file_location('gpu_check', SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

def run(*args, timeout=300, **env):
    "Run the script in a fresh process (as `make gpu-check` does); $OUT unset unless given"
    e = {k: v for k, v in os.environ.items() if k != 'OUT'} | env
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=e,
                          cwd=ROOT)

def test_dry_run_writes_every_figure(tmp_path):
    out = tmp_path/'gpu_check.json'
    r = run('--dry-run', '--out', str(out))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    f = json.loads(out.read_text())
    assert f['dry_run'] and f['shape'] == 'tiny' and f['device'].startswith('CPU')
    assert f['sft']['backend'] in ('transformers', 'unsloth') and f['rollout']['engine'] in ('transformers', 'vllm')
    assert f['rollout']['rollouts'] == 8
    figures = dict(sft_tokens_per_s=f['sft']['tokens_per_s'], rollout_tokens_per_s=f['rollout']['tokens_per_s'],
                   update_tokens_per_s=f['igpo']['update_tokens_per_s'], peak_memory_gb=f['peak_memory_gb'],
                   **{k: f['igpo'][k] for k in ('rollout_s', 'score_s', 'ref_s', 'update_s')},
                   **{f'{p}_peak_memory_gb': f[p]['peak_memory_gb'] for p in ('sft', 'rollout', 'igpo')})
    assert all(v > 0 for v in figures.values()), figures
    assert set(f['dtypes']) == {'model', 'sft', 'rl', 'engine', 'ig'}
    # what it prints: which SFT backend ran, the step's phases, tokens/s and peak memory
    assert f"SFT ({f['sft']['backend']}" in r.stdout and 'update_s' in r.stdout and 'tokens/s' in r.stdout
    assert 'peak memory' in r.stdout and str(out) in r.stdout

def test_full_shape_is_qwen3_4b(qwen3_tok):
    "The full check's config has Qwen3-4B's parameter count (built on the meta device: nothing allocated)"
    from transformers import AutoModelForCausalLM
    g = gpu_check()
    with torch.device('meta'): model = AutoModelForCausalLM.from_config(g.qwen3_config(qwen3_tok, g.QWEN3_4B))
    c = model.config
    assert sum(p.numel() for p in model.parameters()) == 4_022_468_096
    assert (c.vocab_size, c.tie_word_embeddings, c.num_key_value_heads, c.head_dim) == (151936, True, 8, 128)
    assert (c.eos_token_id, c.pad_token_id) == (qwen3_tok.eos_token_id, qwen3_tok.pad_token_id)

@pytest.mark.skipif(torch.cuda.is_available(), reason='this machine has a CUDA GPU')
def test_no_gpu_is_a_clear_error(tmp_path):
    "Without --dry-run a CPU-only machine is told so and nothing is built"
    r = run('--out', str(tmp_path/'g.json'), timeout=120)
    assert r.returncode != 0 and 'no CUDA GPU' in r.stderr and '--dry-run' in r.stderr
    assert 'Traceback' not in r.stderr and not (tmp_path/'g.json').exists()

def test_out_defaults_to_the_device_folder(tmp_path, monkeypatch):
    g = gpu_check()
    monkeypatch.setenv('OUT', str(tmp_path))
    assert g.default_out() == tmp_path/'gpu_check.json'
    monkeypatch.delenv('OUT')
    assert g.default_out() == Path('gpu_check.json')
