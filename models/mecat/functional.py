"""DATE (MECAT, Niu et al., ICML 2026): TF-IDF-weighted sentence embeddings, then the harmonic
mean of a candidate's similarity to its own clip's references and its discrimination against
every other clip's. Written from the metric's definition (research notes section 8.2, checked
against the authors' ``DATE.forward``); the encoder is pluggable (``minilm.MiniLM``).

One set of sentences (all references, or all candidates: each set gets its own IDF):

1. input word embeddings ``E`` of every token (the embedding layer, not contextual); ``e^``
   their L2-normalised rows. ``U``: the distinct token ids of the set (pad excluded).
2. ``S_uu = e^_U e^_U^T``; ``S_ud[u, (s, t)] = e^_u . e^_{s,t}`` (negative values kept).
3. content mask ``m_{s,t}``: real tokens other than the set's [CLS] and [SEP] ids;
   ``df(u) = sum_s clamp(sum_t (S_ud[u, s, t] m_{s,t})^2, 0, 1)``,
   ``idf(u) = log((N + 1) / (df(u) + 1)) + 1`` with ``N`` the sentences of the set.
4. per sentence with content tokens ``u_1..u_n``: ``tf_i = sum_j S_uu[u_i, u_j]^2``,
   ``w_i = tf_i idf(u_i)`` scaled to mean 1; [CLS] gets ``max w`` and [SEP] ``min w``. A
   sentence with no content token keeps weight 1 on both (so do the authors': the mean of the
   empty body is nan, but dividing the empty tensor by it leaves it empty, max = min = 1).
5. the encoder runs on ``w * E`` (``inputs_embeds``): mean pooling, L2 norm.

Scores, ``N`` clips with ``R`` references each: ``M = mean_r(c^ r^_r^T) * penalty`` (candidate
rows), ``sim_i = M_ii``; with ``d = delta / 2``: ``ge = #{k: M_ik > M_ii + d}``,
``eq = #{k: |M_ik - M_ii| <= d}`` (k = i included), ``disc_i = 1 - (ge + eq) / N``,
``DATE_i = 2 sim_i disc_i / (sim_i + disc_i)``. The FENSE-like score is ``sim`` of the plain,
unweighted sentence embeddings. The authors' FENSE error checker (``penalty``) has no offline
weights: its factor is 1 here (the notes' stated deviation); a caller may pass its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch
from neuroedge.models.mecat.fields import DELTA

CHUNK = 64  # sentences per encoder call and per block of the IDF similarities


class Encoder(Protocol):
    """What DATE needs of a sentence encoder (``minilm.MiniLM`` is one)."""

    def ids(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]: ...

    def word_embeddings(self, ids: torch.Tensor) -> torch.Tensor: ...

    def encode_embeds(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor: ...


def idf(
    ids: torch.Tensor, mask: torch.Tensor, embeds: torch.Tensor, cls: int, sep: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Steps 1-3 of one sentence set: the distinct token ids ``U`` (sorted), their normalised
    embedding rows ``e^_U`` and ``idf(U)``.

    ``ids``/``mask`` [n, L] (rows start with [CLS] and end with [SEP] at ``mask.sum() - 1``),
    ``embeds`` [n, L, d] the input word embeddings of ``ids``.
    """
    real = mask.bool()
    flat = ids[real]
    unique, first = torch.unique(flat, return_inverse=True)
    pick = torch.zeros(len(unique), dtype=torch.long).scatter_(0, first, torch.arange(len(flat)))
    e_u = torch.nn.functional.normalize(embeds[real][pick], dim=-1)
    content = real & (ids != cls) & (ids != sep)
    e_all = torch.nn.functional.normalize(embeds, dim=-1) * content[..., None]
    df = torch.zeros(len(unique), dtype=embeds.dtype)
    n, length = ids.shape
    for start in range(0, n, CHUNK):  # [U, chunk * L] similarities at a time
        part = e_all[start : start + CHUNK].reshape(-1, e_all.shape[-1])
        sq = ((e_u @ part.T) ** 2).view(len(unique), -1, length)
        df += sq.sum(2).clamp(0, 1).sum(1)
    return unique, e_u, torch.log((ids.shape[0] + 1) / (df + 1)) + 1


def tfidf_weights(
    ids: torch.Tensor, mask: torch.Tensor, embeds: torch.Tensor, cls: int, sep: int
) -> torch.Tensor:
    """Steps 1-4: the per-token weights [n, L] of one sentence set (0 on padding)."""
    unique, e_u, idf_u = idf(ids, mask, embeds, cls, sep)
    index = {int(u): k for k, u in enumerate(unique)}
    s_uu = e_u @ e_u.T
    weights = torch.zeros(ids.shape, dtype=embeds.dtype)
    for s in range(ids.shape[0]):
        count = int(mask[s].sum())
        rows = [index[int(u)] for u in ids[s, 1 : count - 1]]
        w = torch.ones(count, dtype=embeds.dtype)
        if rows:
            body = (s_uu[rows][:, rows] ** 2).sum(1) * idf_u[rows]
            body = body / body.mean()
            w[1:-1] = body
            w[0], w[-1] = body.max().clamp(min=1.0), body.min().clamp(max=1.0)
        weights[s, :count] = w
    return weights


def _token_set(encoder: Encoder, texts: Sequence[str]) -> tuple[torch.Tensor, ...]:
    """Ids, mask and input word embeddings of one sentence set (tokenised once)."""
    ids, mask = encoder.ids(list(texts))
    return ids, mask, encoder.word_embeddings(ids)


def _weighted(
    encoder: Encoder, ids: torch.Tensor, mask: torch.Tensor, embeds: torch.Tensor
) -> torch.Tensor:
    """Step 5's input: the word embeddings times their TF-IDF weights."""
    tok = getattr(encoder, "tokenizer", None)
    cls, sep = (tok.cls, tok.sep) if tok is not None else (101, 102)
    return embeds * tfidf_weights(ids, mask, embeds, cls, sep)[..., None]


def _encode(encoder: Encoder, embeds: torch.Tensor, mask: torch.Tensor, batch: int) -> torch.Tensor:
    """The encoder ``batch`` sentences at a time, each batch cut to its longest sentence
    (padding is masked: the result does not depend on it)."""
    out = []
    for start in range(0, len(mask), batch):
        m = mask[start : start + batch]
        width = max(int(m.sum(1).max()), 1)
        out.append(encoder.encode_embeds(embeds[start : start + batch, :width], m[:, :width]))
    return torch.cat(out)


def sentence_embeddings(
    encoder: Encoder, texts: Sequence[str], weighted: bool, batch: int = CHUNK
) -> torch.Tensor:
    """L2-normalised embeddings [n, d] of one sentence set: TF-IDF weighted (DATE) or plain.
    The weights use the whole set; the encoder runs ``batch`` sentences at a time."""
    ids, mask, embeds = _token_set(encoder, texts)
    if weighted:
        embeds = _weighted(encoder, ids, mask, embeds)
    return _encode(encoder, embeds, mask, batch)


def score_matrix(
    cand: torch.Tensor, refs: torch.Tensor, penalty: torch.Tensor | None = None
) -> torch.Tensor:
    """``M`` [N, N]: candidate i against clip k, averaged over the R references
    (``cand`` [N, d], ``refs`` [N, R, d]), times the candidate's penalty factor."""
    if refs.ndim != 3 or cand.ndim != 2 or refs.shape[0] != cand.shape[0]:
        raise ValueError(
            f"expected cand [N, d] and refs [N, R, d], got {list(cand.shape)} and "
            f"{list(refs.shape)}"
        )
    m = torch.einsum("id,krd->ikr", cand, refs).mean(-1)
    return m if penalty is None else m * penalty[:, None]


def discrimination(m: torch.Tensor, delta: float) -> torch.Tensor:
    """``disc_i = 1 - (ge + eq) / N`` over row i of ``m`` with the tie band ``delta / 2``."""
    own = torch.diagonal(m)[:, None]
    ge = (m > own + delta / 2).sum(1)
    eq = ((m <= own + delta / 2) & (m >= own - delta / 2)).sum(1)
    return 1.0 - (ge + eq).to(m.dtype) / m.shape[0]


def date_scores(m: torch.Tensor, delta: float) -> dict[str, torch.Tensor]:
    """Per clip: ``similarity``, ``discrimination`` and their harmonic mean ``date``
    (0 where both are 0)."""
    sim, disc = torch.diagonal(m).clone(), discrimination(m, delta)
    den = sim + disc
    date = torch.where(den != 0, 2 * sim * disc / torch.where(den != 0, den, 1), 0.0)
    return {"similarity": sim, "discrimination": disc, "date": date}


def evaluate(
    encoder: Encoder,
    candidates: Sequence[str],
    references: Sequence[Sequence[str]],
    delta: float = DELTA["long"],
) -> dict[str, torch.Tensor]:
    """DATE of one system: per-clip ``similarity``, ``discrimination``, ``date`` and the
    plain-embedding ``fense_sim`` (the FENSE-like similarity, no error checker)."""
    n = len(candidates)
    if n < 2:
        raise ValueError(f"DATE ranks clips against each other: need >= 2 clips, got {n}")
    if len(references) != n:
        raise ValueError(f"{n} candidates but {len(references)} reference lists")
    counts = {len(r) for r in references}
    if len(counts) != 1 or 0 in counts:
        raise ValueError(f"every clip needs the same number (>= 1) of references, got {counts}")
    r = counts.pop()
    flat = [s for refs in references for s in refs]
    sets = [_token_set(encoder, candidates), _token_set(encoder, flat)]  # tokenised once
    weighted = [_encode(encoder, _weighted(encoder, *s), s[1], CHUNK) for s in sets]
    plain = [_encode(encoder, s[2], s[1], CHUNK) for s in sets]
    out = date_scores(score_matrix(weighted[0], weighted[1].view(n, r, -1)), delta)
    m_plain = score_matrix(plain[0], plain[1].view(n, r, -1))
    out["fense_sim"] = torch.diagonal(m_plain).clone()
    return out
