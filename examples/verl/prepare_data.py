"""Data for the DR-Venus run on verl (nbs/41_verl_export.ipynb).

  python examples/verl/prepare_data.py rl QA_FILE [OUT_DIR]       RL prompts: OUT_DIR/train.parquet (default out/verl/rl)
  python examples/verl/prepare_data.py sft SFT.jsonl [OUT_DIR]    SFT set: OUT_DIR/train.parquet + sft.yaml (default out/verl/sft)

QA_FILE: JSONL of {question, answer[, id]} (a list answer gives aliases), a verl RL parquet, an xbench-DeepSearch CSV or
a BrowseComp-ZH xlsx. SFT.jsonl: venus_nb trajectories, e.g. the sft.jsonl `venus-nb resample` writes. The tokenizer of
the SFT export is $VENUS_MODEL's (a local folder or a Hub name), else the Qwen3 tokenizer that ships with venus_nb.
"""
import sys
from pathlib import Path

def load_qa(path:Path)->list:
    "QA records from any supported QA file"
    from venus_nb import data
    loader = {'.parquet': data.load_verl_parquet, '.csv': data.load_xbench, '.xlsx': data.load_browsecomp_zh}.get(path.suffix, data.load_qa_jsonl)
    loaded = loader(path)
    for e in loaded.errors[:5]: print(f'skipped {e.source}:{e.index}: {e.reason}', file=sys.stderr)
    return loaded.trajectories

def rl(qa_file, out='out/verl/rl'):
    from venus_nb.verl_export import verl_rl_frame
    qa, out = load_qa(Path(qa_file)), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    verl_rl_frame(qa).to_parquet(out/'train.parquet')
    print(f'{len(qa)} prompts -> {out}/train.parquet')

def tokenizer():
    import os
    from venus_nb.models import qwen3_tokenizer
    if not os.environ.get('VENUS_MODEL'): return qwen3_tokenizer(thinking_2507=True)
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(os.environ['VENUS_MODEL'])

def sft(sft_file, out='out/verl/sft'):
    from venus_nb.trajectory import read_jsonl
    from venus_nb.verl_export import write_verl_sft
    trajs = read_jsonl(sft_file).trajectories
    out = write_verl_sft(trajs, out, tokenizer())
    print(f'{len(trajs)} trajectories -> {out}/train.parquet; start verl SFT with\n'
          f'  torchrun --standalone --nproc_per_node=8 -m verl.trainer.sft_trainer --config-path={out.resolve()} --config-name=sft '
          f'model.path=$VENUS_MODEL trainer.n_gpus_per_node=8')

if __name__ == '__main__':
    if len(sys.argv) < 3 or sys.argv[1] not in ('rl', 'sft'): sys.exit(__doc__)
    {'rl': rl, 'sft': sft}[sys.argv[1]](*sys.argv[2:])
