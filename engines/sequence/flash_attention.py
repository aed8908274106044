"""FlashAttention as a lesson: exact attention tile by tile, with the online softmax, forward and backward.

Standard attention writes the N × N scores S = QKᵀ/√d and their softmax P to memory, then reads
them back to form O = PV; backward reads P again. FlashAttention (Dao et al. 2022) never holds
S or P whole. It walks the keys in blocks of `block_k` columns for each block of `block_q`
query rows, and keeps per row only a running maximum m, a running sum l and an unnormalised
output (the online softmax, Milakov & Gimelshein 2018). When a new block raises the maximum
from m to m', what was summed so far was scaled by e^{−m} and is rescaled by e^{m − m'}:

    m' = max(m, rowmax(S_j)),  P_j = e^{S_j − m'},  l' = e^{m − m'} l + rowsum(P_j),
    acc' = e^{m − m'} acc + P_j V_j,           and at the end  O = acc / l,  L = m + ln l.

The result is softmax(QKᵀ/√d)V exactly (to rounding); only the row logsumexp L (N numbers) is
kept for backward, which recomputes each block's P = e^{S − L} from Q, K and L instead of
reading a stored P. With D = rowsum(dO ∘ O):

    dV_j += Pᵀ dO_i,   dP = dO_i V_jᵀ,   dS = P ∘ (dP − D_i),   dQ_i += dS K_j/√d,   dK_j += dSᵀ Q_i/√d.

Loops run query blocks outside and key blocks inside (FlashAttention-2's order; the paper's
Algorithm 1 swaps them, with the same arithmetic per block). Written in PyTorch for reading, not
for speed: on a GPU the gain comes from one fused kernel keeping the blocks in on-chip SRAM.
"""
import torch

Tensor = torch.Tensor


def explicit_attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False) -> Tensor:
    """softmax(QKᵀ/√d)V with the N × N scores and probabilities held whole (the standard way)."""
    scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5  # (..., N, N)
    if causal:
        scores = scores.masked_fill(causal_mask(q.shape[-2], q.shape[-2], 0, 0, q.device), float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def causal_mask(rows: int, cols: int, row0: int, col0: int, device: torch.device) -> Tensor:
    """True where key column col0 + c lies after query row row0 + r (a position may not look ahead)."""
    r = torch.arange(row0, row0 + rows, device=device)[:, None]
    c = torch.arange(col0, col0 + cols, device=device)[None, :]
    return c > r


def block_scores(q_i: Tensor, k_j: Tensor, i0: int, j0: int, causal: bool) -> Tensor:
    """S_ij = Q_i K_jᵀ/√d for one tile, the look-ahead masked to −∞ when causal."""
    s = q_i @ k_j.transpose(-1, -2) * q_i.shape[-1] ** -0.5  # (..., block_q, block_k)
    if causal and j0 + k_j.shape[-2] - 1 > i0:
        s = s.masked_fill(causal_mask(q_i.shape[-2], k_j.shape[-2], i0, j0, q_i.device), float("-inf"))
    return s


def key_blocks(i0: int, rows: int, n: int, block_k: int, causal: bool) -> range:
    """Key-block starts a query block meets; causal rows never reach past their own position."""
    return range(0, min(n, i0 + rows) if causal else n, block_k)


def tiled_forward(q: Tensor, k: Tensor, v: Tensor, block_q: int, block_k: int,
                  causal: bool = False) -> tuple[Tensor, Tensor]:
    """(O, L): attention and its row logsumexp, one (block_q × block_k) tile at a time."""
    n = q.shape[-2]
    out, lse = torch.empty_like(q), q.new_empty(q.shape[:-1])  # (..., N, d), (..., N)
    for i0 in range(0, n, block_q):
        q_i = q[..., i0:i0 + block_q, :]
        rows = q_i.shape[-2]
        m = q.new_full((*q.shape[:-2], rows), float("-inf"))  # running row max
        l = q.new_zeros((*q.shape[:-2], rows))                 # running row sum of e^{s − m}
        acc = q.new_zeros((*q.shape[:-2], rows, q.shape[-1]))  # running Σ e^{s − m} v
        for j0 in key_blocks(i0, rows, n, block_k, causal):
            s = block_scores(q_i, k[..., j0:j0 + block_k, :], i0, j0, causal)
            m_new = torch.maximum(m, s.amax(dim=-1))  # finite: column 0 is in every row's first block
            p = torch.exp(s - m_new[..., None])
            rescale = torch.exp(m - m_new)             # e^{m − m'}: 0 on the first block (m = −∞)
            l = rescale * l + p.sum(dim=-1)
            acc = rescale[..., None] * acc + p @ v[..., j0:j0 + block_k, :]
            m = m_new
        out[..., i0:i0 + rows, :] = acc / l[..., None]
        lse[..., i0:i0 + rows] = m + torch.log(l)
    return out, lse


def tiled_backward(q: Tensor, k: Tensor, v: Tensor, out: Tensor, lse: Tensor, grad_out: Tensor, block_q: int,
                   block_k: int, causal: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """(dQ, dK, dV), each tile's P recomputed from Q, K and the saved logsumexp."""
    n, scale = q.shape[-2], q.shape[-1] ** -0.5
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    delta = (grad_out * out).sum(dim=-1)  # D = rowsum(dO ∘ O) = rowsum(P ∘ dP), (..., N)
    for i0 in range(0, n, block_q):
        q_i, do_i = q[..., i0:i0 + block_q, :], grad_out[..., i0:i0 + block_q, :]
        rows = q_i.shape[-2]
        lse_i, delta_i = lse[..., i0:i0 + rows, None], delta[..., i0:i0 + rows, None]
        for j0 in key_blocks(i0, rows, n, block_k, causal):
            k_j, v_j = k[..., j0:j0 + block_k, :], v[..., j0:j0 + block_k, :]
            p = torch.exp(block_scores(q_i, k_j, i0, j0, causal) - lse_i)  # P recomputed, never stored
            dv[..., j0:j0 + block_k, :] += p.transpose(-1, -2) @ do_i
            ds = p * (do_i @ v_j.transpose(-1, -2) - delta_i)  # softmax's backward, row by row
            dq[..., i0:i0 + rows, :] += ds @ k_j * scale
            dk[..., j0:j0 + block_k, :] += ds.transpose(-1, -2) @ q_i * scale
    return dq, dk, dv


class TiledAttention(torch.autograd.Function):
    """Autograd sees one op: forward keeps Q, K, V, O and L (O(N·d)), backward recomputes the tiles."""

    @staticmethod
    def forward(ctx, q: Tensor, k: Tensor, v: Tensor, block_q: int, block_k: int, causal: bool) -> Tensor:
        out, lse = tiled_forward(q, k, v, block_q, block_k, causal)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.blocks = (block_q, block_k, causal)
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        q, k, v, out, lse = ctx.saved_tensors
        return (*tiled_backward(q, k, v, out, lse, grad_out.contiguous(), *ctx.blocks), None, None, None)


def flash_attention(q: Tensor, k: Tensor, v: Tensor, block_q: int = 64, block_k: int = 64,
                    causal: bool = False) -> Tensor:
    """softmax(QKᵀ/√d)V, tiled, differentiable: q, k, v of shape (..., N, d)."""
    return TiledAttention.apply(q, k, v, block_q, block_k, causal)
