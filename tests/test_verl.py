"venus_nb inside verl (nbs/13_verl.ipynb): run in .venv-verl by `make verl-test`; skipped where verl is not installed."
import os, subprocess, sys
from pathlib import Path
import pytest

pytest.importorskip('verl', reason='verl is not installed: `make verl-test` runs these tests in .venv-verl')
import numpy as np
import torch
from omegaconf import OmegaConf
from conftest import ROOT
from venus_nb.rewards import RewardConfig, turn_advantages, token_advantages
from venus_nb.trajectory import Tokenized, from_record
from venus_nb import verl as vv

VARIANTS = {'default': {}, 'separate': dict(norm='separate'), 'joint': dict(norm='joint'), 'split': dict(credit='split'),
            'replace': dict(penalty='replace'), 'prob_diff': dict(ig='prob_diff'), 'all_tools': dict(scored='all_tools'),
            'grpo': dict(estimator='grpo'), 'gamma1': dict(gamma=1.0), 'scale': dict(eta=0.1, s_max=3.0, lambda_fmt=0.5),
            'split_replace_joint': dict(credit='split', penalty='replace', norm='joint', gamma=0.9)}

def _algo(**venus):
    "verl's `algorithm` config selecting venus_igpo with RewardConfig fields under `venus`"
    gamma = venus.pop('gamma', 0.95)
    return OmegaConf.create({'adv_estimator': 'venus_igpo', 'gamma': gamma, 'use_kl_in_reward': False, 'venus': venus})

def _reference(mask, index, ig, ok, out, cfg):
    "turn_advantages broadcast to tokens with token_advantages, row by row"
    adv = turn_advantages([[None] * len(o) for o in ok], ig, ok, out, index, cfg)
    rows = []
    for m, a in zip(mask, adv):
        runs = vv.assistant_runs(m)
        rows.append(token_advantages(Tokenized([0] * len(m), m.tolist(), runs, [None] * len(runs), 0), a))
    return torch.tensor(rows, dtype=torch.float64)

def test_registry_returns_the_estimator():
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    fn = get_adv_estimator_fn('venus_igpo')
    assert fn.__name__ == 'venus_igpo_advantages' and vv.register_estimator() is fn
    rewards, mask, index, _ = vv.random_rollouts(seed=3)
    torch.testing.assert_close(fn(token_level_rewards=rewards, response_mask=mask, index=np.array(index, dtype=object), config=_algo())[0],
                               vv.venus_igpo_advantages(rewards, mask, index, _algo())[0])

@pytest.mark.parametrize('variant', list(VARIANTS))
def test_advantages_equal_turn_advantages(variant):
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    fn, cfg = get_adv_estimator_fn('venus_igpo'), RewardConfig(**VARIANTS[variant])
    for seed in range(4):
        rewards, mask, index, (ig, ok, out) = vv.random_rollouts(n_groups=4, g=8, max_turns=8, seed=seed, cfg=cfg)
        adv, ret = fn(token_level_rewards=rewards, response_mask=mask, index=np.array(index, dtype=object), config=_algo(**VARIANTS[variant]))
        ref = _reference(mask, index, ig, ok, out, cfg)
        assert adv.shape == mask.shape and adv.dtype == torch.float32
        torch.testing.assert_close(adv.double(), ref, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(ret, adv)

def test_lambda_variant_uses_one_lambda_for_hook_and_estimator():
    "The hook writes -lambda for a malformed answer; the estimator's penalty slots use the same lambda from the config"
    cfg = RewardConfig(lambda_fmt=0.5)
    mask = torch.tensor([1, 1, 0, 0, 0, 1, 1, 0, 0, 1, 1] * 2).view(2, -1)
    rows = torch.stack([vv.encode_turn_rewards(mask[0], [0.3, None, None], [True, False, True], 1.0, cfg),
                        vv.encode_turn_rewards(mask[1], [0.1, None, None], [True, True, False], 1.0, cfg)])
    adv, _ = vv.venus_igpo_advantages(rows, mask, ['u', 'u'], _algo(lambda_fmt=0.5))
    ref = _reference(mask, ['u', 'u'], [[0.3, None, None], [0.1, None, None]], [[True, False, True], [True, True, False]], [1.0, 1.0], cfg)
    torch.testing.assert_close(adv.double(), ref, rtol=1e-6, atol=1e-6)

def test_verl_compute_advantage_path():
    "verl's own dispatch (`compute_advantage`, which the v1 trainer calls for non-GRPO estimators) reaches venus_igpo"
    from verl import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage
    rewards, mask, index, (ig, ok, out) = vv.random_rollouts(seed=7)
    data = DataProto.from_dict(tensors={'token_level_rewards': rewards, 'response_mask': mask},
                               non_tensors={'uid': np.array(index, dtype=object)})
    data = compute_advantage(data, adv_estimator='venus_igpo', gamma=0.95, config=_algo())
    torch.testing.assert_close(data.batch['advantages'].double(), _reference(mask, index, ig, ok, out, RewardConfig()), rtol=1e-6, atol=1e-6)

def test_kl_in_reward_is_refused():
    rewards, mask, index, _ = vv.random_rollouts(seed=1)
    with pytest.raises(ValueError, match='use_kl_in_reward'):
        vv.venus_igpo_advantages(rewards, mask, index, OmegaConf.create({'gamma': 0.95, 'use_kl_in_reward': True}))

def test_ig_of_zero_is_a_slot():
    "An IG of exactly 0 stays an IG slot (method.md §6): it enters the IG statistics and splits the credit"
    mask = torch.tensor([[1, 1, 0, 0, 1, 1, 0, 0, 1, 1]] * 2)
    zero = vv.encode_turn_rewards(mask[0], [0.0, None, None], [True] * 3, 1.0)
    none = vv.encode_turn_rewards(mask[0], [None, None, None], [True] * 3, 1.0)
    assert vv.decode_turn_rewards(zero, mask[0])[0] == [0.0, None, None]
    assert vv.decode_turn_rewards(none, mask[0])[0] == [None, None, None]

def test_agent_loop_output_carries_the_row(qwen3_tok):
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, _agent_loop_registry
    from venus_nb.trajectory import read_jsonl
    t = read_jsonl(ROOT/'data/sample/trajectories.jsonl').trajectories[1]
    tk = t.tokenize(qwen3_tok)
    resp, mask = tk.ids[tk.prompt_len:], tk.loss_mask[tk.prompt_len:]
    row = vv.rollout_turn_rewards(qwen3_tok, resp, mask, t.gt, [None, None, None, 0.5, None])
    d = vv.VenusAgentLoopOutput(prompt_ids=tk.ids[:tk.prompt_len], response_ids=resp, response_mask=mask, metrics=AgentLoopMetrics(),
                                reward_score=1.0, turn_rewards=row.tolist()).as_dict()
    assert d['rm_scores'].tolist() == row.tolist() and d['responses'].tolist() == resp
    assert _agent_loop_registry['venus_tool_agent']['_target_'].endswith('VenusToolAgentLoop')

# --- SFT export on a real DR-Venus trajectory

def test_sft_parquet_loads_with_verl_and_masks_match(dr_venus_records, qwen3_tok, tmp_path):
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
    import yaml
    trajs = [from_record(r) for r in dr_venus_records[:3]]
    out = vv.write_verl_sft(trajs, tmp_path, qwen3_tok)
    data = yaml.safe_load((out/'sft.yaml').read_text())['data']
    ds = MultiTurnSFTDataset(data['train_files'], qwen3_tok, data)
    assert len(ds) == len(trajs)
    for i, t in enumerate(trajs):
        x, tk = ds[i], t.tokenize(qwen3_tok)
        assert qwen3_tok.decode(tk.ids[-1:]) == '\n' and tk.loss_mask[-1] == 0  # the one token verl's rows end before
        assert x['input_ids'].tolist() == tk.ids[:-1]
        assert x['loss_mask'].tolist() == tk.loss_mask[:-1]
        assert '<think>' in qwen3_tok.decode(x['input_ids'][x['loss_mask'].bool()].tolist())  # the reasoning is trained

def test_sft_config_composes(tmp_path, qwen3_tok):
    "The generated SFT config composes with verl's SFT trainer defaults"
    from hydra import compose, initialize_config_dir
    from venus_nb.trajectory import read_jsonl
    out = vv.write_verl_sft(read_jsonl(ROOT/'data/sample/trajectories.jsonl').trajectories, tmp_path, qwen3_tok)
    with initialize_config_dir(config_dir=str(out), version_base=None): cfg = compose('sft')
    assert cfg.data.train_files.endswith('train.parquet') and 'im_start' in cfg.data.apply_chat_template_kwargs.chat_template
    assert cfg.data.messages_key == 'messages'

# --- the launch: config dry run, tools, RL data

def test_launch_config_validates():
    cfg = vv.load_verl_config(ROOT/'examples/verl/dr_venus_igpo.yaml')
    assert (cfg.data.train_batch_size, cfg.actor_rollout_ref.rollout.n) == (16, 8)
    assert cfg.algorithm.adv_estimator == 'venus_igpo' and vv.reward_config(cfg.algorithm) == RewardConfig()
    assert cfg.actor_rollout_ref.rollout.agent.default_agent_loop == 'venus_tool_agent'
    assert cfg.ray_kwargs.ray_init.runtime_env.env_vars.VERL_USE_EXTERNAL_MODULES == 'venus_nb.verl'
    for name, venus in VARIANTS.items():
        ov = [f'algorithm.venus.{k}={v}' for k, v in venus.items() if k != 'gamma'] + [f'algorithm.gamma={venus.get("gamma", 0.95)}']
        assert vv.reward_config(vv.load_verl_config(ROOT/'examples/verl/dr_venus_igpo.yaml', ov).algorithm) == RewardConfig(**venus), name

def test_launch_script_dry_run(tmp_path):
    "run_dr_venus.sh with DRY_RUN=1 writes the RL parquet and validates the config without starting Ray"
    env = {**os.environ, 'DRY_RUN': '1', 'PY': sys.executable, 'VENUS_RL_DATA': str(tmp_path/'rl'), 'NNODES': '4'}
    r = subprocess.run(['bash', str(ROOT/'examples/verl/run_dr_venus.sh'), str(ROOT/'data/sample/world/qa.jsonl'), 'algorithm.venus.credit=split'],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path/'rl/train.parquet').exists() and 'config ok' in r.stdout, r.stdout[-2000:]
    assert 'credit=split' in r.stdout and 'nnodes=4' in r.stdout

def test_rl_parquet_loads_with_verl(tmp_path, qwen3_tok):
    import json
    from verl.utils.dataset.rl_dataset import RLHFDataset
    qa = [json.loads(l) for l in (ROOT/'data/sample/world/qa.jsonl').read_text().splitlines()][:4]
    vv.verl_rl_frame(qa).to_parquet(tmp_path/'train.parquet')
    ds = RLHFDataset(str(tmp_path/'train.parquet'), qwen3_tok, OmegaConf.create({'max_prompt_length': 4096, 'return_raw_chat': True}))
    row = ds[0]
    assert row['raw_prompt'][1]['content'] == qa[0]['question'] and row['agent_name'] == 'venus_tool_agent'
    assert row['reward_model']['ground_truth'] == qa[0]['answer']

def test_tools_from_config(monkeypatch):
    import asyncio
    from verl.tools.tool_registry import initialize_tools_from_config
    monkeypatch.setenv('VENUS_NB_CORPUS', str(ROOT/'data/sample/world/corpus.jsonl'))
    tools = {t.name: t for t in initialize_tools_from_config(str(ROOT/'examples/verl/tools.yaml'))}
    assert sorted(tools) == ['search', 'visit']
    assert tools['visit'].tool_schema.function.parameters.required == ['url', 'goal']
    hit, reward, _ = asyncio.run(tools['search'].execute('i', {'query': ['capital of Osithgar']}))
    assert 'Osithgar' in hit.text and reward == 0.0
    page, _, _ = asyncio.run(tools['visit'].execute('i', {'url': ['corpus://thaarmar'], 'goal': 'first president'}))
    assert 'Nalun Marar' in page.text
    bad, _, _ = asyncio.run(tools['visit'].execute('i', {'goal': 'x'}))
    assert bad.text.startswith('[visit error]')

def test_notebook_runs_with_verl_cells():
    from nbdev.config import get_config
    from nbdev.test import test_nb
    ok, _ = test_nb(ROOT/'nbs/13_verl.ipynb', skip_flags=get_config().tst_flags.split(), force_flags=['verl'], basepath=get_config().config_path)
    assert ok, '13_verl failed with its verl cells (traceback above)'

def test_agent_loop_end_to_end(qwen3_tok, monkeypatch):
    "verl's tool agent loop with a scripted LLM server: venus tools answer, the hook's row becomes rm_scores"
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.workers.rollout.replica import TokenOutput
    from verl.tools.tool_registry import initialize_tools_from_config
    from verl.utils.dataset.rl_dataset import RLHFDataset
    from venus_nb.trajectory import read_jsonl
    from venus_nb.tools import system_prompt
    monkeypatch.setenv('VENUS_NB_CORPUS', str(ROOT/'data/sample/world/corpus.jsonl'))
    cfg = vv.load_verl_config(ROOT/'examples/verl/dr_venus_igpo.yaml', ['data.max_response_length=8192'])
    traj = read_jsonl(ROOT/'data/sample/trajectories.jsonl').trajectories[1]
    replies = iter(t.raw + '<|im_end|>' for t in traj.turns)

    class ScriptedServer:
        async def generate(self, request_id, prompt_ids, sampling_params, **kw):
            return TokenOutput(token_ids=qwen3_tok.encode(next(replies), add_special_tokens=False))

    loop = vv.VenusToolAgentLoop(trainer_config=DictConfigWrap(cfg), server_manager=ScriptedServer(), tokenizer=qwen3_tok,
                                 processor=None, dataset_cls=RLHFDataset, data_config=DictConfigWrap(cfg.data),
                                 tools=ToolListWrap(initialize_tools_from_config(str(ROOT/'examples/verl/tools.yaml'))),
                                 ig_scorer=lambda agent_loop, out, gt: [None, None, None, 0.5, None])
    row = vv.verl_rl_frame([{'question': traj.question, 'answer': traj.gt}]).iloc[0].to_dict()
    out = loop.loop.run_until_complete(loop.run({'temperature': 1.0}, raw_prompt=row['prompt'], reward_model=row['reward_model'],
                                                extra_info=row['extra_info']))
    d = out.as_dict()
    assert isinstance(out, vv.VenusAgentLoopOutput) and len(vv.assistant_runs(d['response_mask'])) == len(traj.turns)
    assert vv.decode_turn_rewards(d['rm_scores'], d['response_mask']) == ([None, None, None, 0.5, None], [True] * 5, 1.0)
    text = qwen3_tok.decode(out.response_ids)
    assert 'Harrow Suite composer' in text and '[visit error]' in text  # the search and visit tools answered
    assert qwen3_tok.decode(out.prompt_ids).count('# Tools') == system_prompt().count('# Tools')  # one tool list

def test_turn_texts_start_inside_the_thinking_the_template_opens():
    "Qwen3-Thinking-2507: verl's response ids hold no <think>; the turn texts read with it match the rollout loop's"
    from venus_nb.models import qwen3_tokenizer
    from venus_nb.tools import load_corpus
    from venus_nb.rollout import RolloutConfig, ScriptedEngine, rollout
    q3 = qwen3_tokenizer(thinking_2507=True)
    world = load_corpus(ROOT/'data'/'sample'/'world'/'corpus.jsonl')
    search = 'Look.\n</think>\n<tool_call>\n{"name": "search", "arguments": {"query": ["x"]}}\n</tool_call>'
    t = rollout(ScriptedEngine(q3, [search, 'Done.\n</think>\n<answer>42</answer>']), ['q?'], world, RolloutConfig(G=1, progress=False))[0]
    tk = t.tokens
    resp, mask = torch.tensor(tk.ids[tk.prompt_len:]), torch.tensor(tk.loss_mask[tk.prompt_len:])
    assert vv.turn_texts(q3, resp, mask) == [x.raw for x in t.turns]
    assert [(x.kind, x.ok) for x in vv.rollout_turns(q3, resp, mask)] == [('search', True), ('answer', True)]
