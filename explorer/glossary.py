"""The training glossary, as data: every term, our own one-line definition, its section.

The term list follows the course glossary (seed 000: seven sections from core mechanics to
distributed training, 66 terms) plus the gradient-related terms of seed 004, gathered in
their own section, and the terms the language-model pages added (their own section). The definitions are written here, in our words. A scenario declares, per
term it shows, the evidence: the figure and the metrics whose records show it
(`Scenario.terms`); the registry contract test runs the scenario and finds them. Coverage
is computed from that evidence only: over the course glossary's terms, and separately over
the rest; the Glossary page links each term to the figure that shows it.

The training methods (seed 002: 23 methods, from Adam to word2vec) are listed apart, each with
our one-line meaning. A scenario declares the methods it shows like its terms (`Scenario.methods`,
evidence marked `partial` where the page shows only part of the method); `scenarios_by_method`
and `method_coverage` count from that evidence only.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    name: str        # exact name scenarios use in `terms`
    definition: str  # one line, ours
    section: str
    origin: str = "course"  # "course" (seed 000), "gradients" (seed 004), or "added" (declared by a scenario)


SECTIONS: dict[str, list[tuple[str, str]]] = {
    "Core Mechanics": [
        ("Tensor", "An n-dimensional grid of numbers with a dtype and a device; every input, weight and gradient is one."),
        ("nn.Module", "The PyTorch class a layer or model subclasses: it owns parameters and sub-modules and defines forward()."),
        ("Forward pass", "Feeding a batch through the layers in order to get outputs and, from them, the loss."),
        ("Backpropagation", "Walking the computation backwards from the loss, multiplying local derivatives to get every parameter's gradient."),
        ("Autodiff", "Letting the framework record the operations and derive exact gradients mechanically, instead of by hand."),
        ("Chain rule", "The derivative of f(g(x)) is f'(g(x))·g'(x): through many layers, a product of per-layer factors."),
        ("Loss function", "The scalar that scores predictions against targets; training is the search for weights that make it small."),
        ("Gradient descent", "Step the weights a little against the gradient, recompute, and repeat until the loss stops falling."),
        ("Initialization", "How weights are drawn before step 0; its variance decides whether signals and gradients keep their size through depth."),
    ],
    "Optimization & Training": [
        ("SGD", "Gradient descent on a random mini-batch per step: w ← w − lr·g, noisy but cheap."),
        ("Momentum", "Keep a decaying sum of past gradients and step along it, so consistent directions speed up and jitter cancels."),
        ("Adam", "An optimizer that divides a momentum term by a running RMS of the gradient, giving each parameter its own step size."),
        ("AdamW", "Adam whose weight decay shrinks the weights directly instead of being added to the gradient and then rescaled."),
        ("Learning rate", "The multiplier on each update; too small and nothing moves, too large and the loss oscillates or blows up."),
        ("Warmup", "Starting with a small learning rate and ramping it up over the first steps, while optimizer statistics are still poor."),
        ("Cosine decay", "Lowering the learning rate along half a cosine from its peak to a floor by the end of training."),
        ("Gradient clipping", "Rescaling the gradient when its norm passes a threshold, so one bad batch cannot throw the weights far."),
        ("Batch size", "The number of examples averaged into one gradient estimate; larger batches give less noisy but costlier steps."),
        ("Vanishing / exploding gradients", "Per-layer factors multiplying through depth, so early layers get gradients far smaller (or larger) than late ones."),
        ("Dead ReLU", "A ReLU unit whose input is negative for every example, so it outputs zero and its weights never get a gradient again."),
        ("Checkpoint", "Weights plus optimizer state written to disk mid-training, so a run can resume or be evaluated later."),
    ],
    "Architecture": [
        ("Attention", "Each position builds its output as a weighted average of other positions' values, with weights it computes itself."),
        ("Query / Key / Value (Q/K/V)", "Three linear maps of each token: queries are matched against keys, and the match weights mix the values."),
        ("Scaled dot-product attention", "softmax(QKᵀ/√d)·V — dividing by √d keeps the scores from saturating the softmax as d grows."),
        ("Multi-head attention", "Several smaller attentions side by side, each free to track a different relation, then concatenated."),
        ("Positional encoding", "A signal added to (or rotating) token vectors so attention, which is order-blind, can tell positions apart."),
        ("RoPE", "Rotary embeddings: rotate query and key pairs by position-dependent angles so their dot product depends on relative offset."),
        ("Residual (skip) connection", "Computing h + f(h) instead of f(h), which gives the gradient an identity path around every block."),
        ("Layer normalization", "Centering and scaling each example's features by their own mean and spread, independent of the batch."),
        ("Batch normalization", "Centering and scaling each feature by its mean and spread over the batch, with learned scale and shift."),
        ("Dropout", "Zeroing a random fraction of activations at training time so the network cannot lean on any single unit."),
    ],
    "Generalization": [
        ("Weight decay / L2 regularization", "Pulling every weight toward zero a little each step, which favours smaller, smoother solutions."),
        ("Overfitting", "Training loss keeps falling while held-out loss rises: the model is fitting noise particular to its training set."),
        ("Early stopping", "Keeping the weights from the step where validation loss was lowest instead of those from the last step."),
        ("Embedding", "A learned vector per item (token, image, user) in a space where distance tracks similarity."),
        ("Contrastive learning", "Shaping an embedding space by making matched pairs score higher than mismatched ones."),
        ("InfoNCE", "A contrastive loss: cross-entropy over which of many candidates is the true partner of each anchor."),
        ("Cosine similarity", "The dot product of two vectors divided by their lengths: their agreement in direction, from −1 to 1."),
    ],
    "Fine-Tuning & Compression": [
        ("Transfer learning", "Reusing what a model learned on one broad task as the starting point for another, narrower one."),
        ("Fine-tuning", "Continuing training of pretrained weights on a smaller task-specific dataset, usually with a lower learning rate."),
        ("LoRA", "Freezing a weight W and learning a low-rank correction B·A beside it, so only a few parameters train."),
        ("QLoRA", "LoRA adapters trained on a frozen base stored in 4-bit NormalFloat, its block constants quantized again: a fraction of the memory for nearly LoRA's loss."),
        ("Low-rank hypothesis", "The bet that the change fine-tuning needs has few important directions, so a low-rank update can capture it."),
        ("Rank (r)", "The inner dimension of LoRA's B·A: it caps how many independent directions the update can have."),
        ("Alpha scaling", "LoRA multiplies its update by α/r, so changing the rank does not change the update's overall size."),
        ("Quantization", "Storing weights or activations as low-bit integers plus a scale, trading a rounding error for memory and speed."),
        ("Scale / zero-point", "The two numbers of an affine quantizer: real ≈ scale · (integer − zero_point)."),
        ("Symmetric / asymmetric quantization", "Symmetric fixes zero-point at 0 around a ±max range; asymmetric shifts the range to cover [min, max] exactly."),
        ("Per-channel quantization", "One scale per output channel instead of one per tensor, so a single large channel cannot coarsen all the others."),
        ("QAT (Quantization-Aware Training)", "Training with fake-quantized weights in the forward pass so the model learns to tolerate the rounding."),
        ("Straight-through estimator", "Treating round() as the identity in the backward pass so a gradient can flow through the quantizer."),
        ("Knowledge distillation", "Training a small student to match a large teacher's output distribution, not just the hard labels."),
        ("Soft targets", "The teacher's full probability vector, whose small entries say which wrong answers are nearly right."),
        ("Temperature", "Dividing logits by T before the softmax: T > 1 flattens the distribution, T < 1 sharpens it."),
        ("KL divergence", "The expected extra log-loss of coding samples from P with a code built for Q; zero only when they match."),
    ],
    "Alignment": [
        ("Bradley-Terry model", "P(a preferred to b) = σ(r(a) − r(b)): pairwise preferences explained by a hidden score per item."),
        ("Reward model", "A network trained on human comparisons to output a score for a response, standing in for the human."),
        ("RLHF", "Fine-tuning a language model with reinforcement learning against a reward model fitted to human preferences."),
        ("PPO", "A policy-gradient method that clips each update's probability ratio so the policy cannot move too far per step."),
        ("DPO", "Fitting the policy to preference pairs directly with a logistic loss on log-probability ratios, with no reward model."),
        ("Beta (β), in DPO", "The strength of DPO's tie to the reference model: small β lets the policy drift further from it."),
    ],
    "Distributed Training": [
        ("DDP", "Data parallelism with a full replica per device: each computes gradients on its shard of the batch, then they are averaged."),
        ("FSDP", "Sharding parameters, gradients and optimizer state across devices and gathering each layer only while it is needed."),
        ("DTensor", "A tensor that knows how it is split or replicated across devices, so sharded code reads like single-device code."),
        ("All-reduce", "A collective that sums (or averages) one tensor across all ranks and leaves the result on every rank."),
        ("All-gather", "A collective where each rank contributes its shard and every rank receives the concatenation."),
        ("Mixed precision", "Running matmuls in bf16 or fp16 for speed and memory while keeping sensitive state in fp32."),
        ("Master weights", "The fp32 copy of the parameters that updates are applied to, so tiny steps are not rounded away in 16 bits."),
    ],
    "Gradients & Numerics": [
        ("Gradient", "The vector of partial derivatives of the loss: which way, and how steeply, each weight would raise it."),
        ("Autograd", "PyTorch's autodiff engine: it records operations on tensors and runs the backward pass on .backward()."),
        ("Optimizer", "The rule that turns gradients (and its own running state) into weight updates: SGD, Adam and the like."),
        ("Activation function", "The elementwise nonlinearity between layers; its slope is a factor in every back-propagated gradient."),
        ("ReLU", "max(0, x): slope 1 for positive inputs and 0 otherwise, cheap and non-saturating on one side."),
        ("NaN (Not a Number)", "The floating-point value for undefined results such as 0/0 or ∞−∞; one NaN spreads to everything it touches."),
        ("Gradient accumulation", "Summing gradients over several micro-batches before one optimizer step, to emulate a batch that does not fit."),
        ("Activation checkpointing", "Keeping only some activations in the forward pass and recomputing the rest during backward: compute for memory."),
        ("Learning rate schedule", "The learning rate as a function of step — warmup, constant, step, cosine — rather than one fixed number."),
        ("Cross-entropy", "The negative log-probability a model gives the correct class; ln(classes) when it is guessing uniformly."),
        ("Softmax", "exp(zᵢ)/Σ exp(zⱼ): turns a vector of logits into probabilities that are positive and sum to one."),
    ],
    "Language Models": [
        ("Token", "One unit of text a model reads or writes (a byte, a piece of a word, a word), named by an integer id."),
        ("Byte-pair encoding (BPE)", "A tokenizer grown from the 256 bytes by merging the most frequent adjacent pair into a new token, again and again."),
        ("Vocabulary size", "How many tokens a tokenizer has: more make text shorter, but each row of the embedding rarer and the output layer wider."),
        ("Perplexity", "e to the loss in nats per token: how many equally likely choices would leave the model as unsure as it is."),
        ("Bits per byte", "The loss in bits divided by the bytes each token covers, so models with different tokenizers compare fairly."),
        ("Entropy rate", "A source's uncertainty per token given its whole past; on the source's fresh text no model's loss goes below it."),
        ("Exposure bias", "Trained only on true prefixes, a model meets its own imperfect ones when it generates, and its slips can compound."),
        ("Scheduled sampling", "Swapping some training inputs for the model's own samples, more as training goes on, so it sees its own slips."),
        ("Causal mask", "An attention mask that lets each position see only the ones before it, so a model can predict the next token."),
        ("Negative sampling", "Training a scorer to tell true (word, context) pairs from a few random noise words, instead of a softmax over all words."),
        ("Pointwise mutual information (PMI)", "ln P(w, c) / (P(w) P(c)): how much more often two words co-occur than if they were independent."),
    ],
}

ORIGIN_BY_SECTION = {"Gradients & Numerics": "gradients", "Language Models": "added"}
ADDED = {"Initialization"}  # in neither seed list; declared by a scenario and a genuine training term
GRADIENTS_SEED = {"QLoRA"}  # seed 004's, listed beside its relatives in a course section

TERMS: tuple[Term, ...] = tuple(
    Term(name, definition, section, "added" if name in ADDED else
         "gradients" if name in GRADIENTS_SEED else ORIGIN_BY_SECTION.get(section, "course"))
    for section, entries in SECTIONS.items() for name, definition in entries)
BY_NAME: dict[str, Term] = {term.name: term for term in TERMS}


def term(name: str) -> Term:
    """The glossary entry named exactly `name` (KeyError names close matches)."""
    try:
        return BY_NAME[name]
    except KeyError:
        close = [t.name for t in TERMS if name.lower() in t.name.lower() or t.name.lower() in name.lower()]
        raise KeyError(f"{name!r} is not a glossary term" + (f"; did you mean {', '.join(close)}?" if close else ""))


def scenarios_by_term(scenarios) -> dict[str, list]:
    """Term name -> the scenarios (in gallery order) that declare evidence for it: a figure and
    the metrics that show the term, which the registry contract test finds in a real run."""
    shown: dict[str, list] = {t.name: [] for t in TERMS}
    for scenario in scenarios:
        for name in scenario.terms:
            if name in shown:
                shown[name].append(scenario)
    return shown


def coverage(scenarios, origin: str | None = "course") -> tuple[int, int]:
    """(terms with evidence in some scenario, all terms) among the terms of `origin`: "course"
    is the seed glossary's 66 terms; None counts every term here."""
    shown = scenarios_by_term(scenarios)
    names = [t.name for t in TERMS if origin is None or t.origin == origin]
    return sum(1 for name in names if shown[name]), len(names)


# --- training methods (seed 002), in our words --------------------------------------------------
METHODS: tuple[tuple[str, str], ...] = (
    ("Adam (optimizer)", "Steps each weight by its gradient's running mean over its running RMS: momentum with a step size per parameter."),
    ("Analytic distillation", "Pulling what a trained model knows into a smaller or more explicit form: a student, written rationales, or circuits read from weights."),
    ("Backpropagation", "The reverse sweep that applies the chain rule from the loss back through every layer: all gradients for about one forward pass's cost."),
    ("Compositional generalization", "Handling new combinations of familiar parts (a known verb with a known modifier never seen together), where networks often fail."),
    ("Cross-entropy loss", "The mean negative log-probability given to the token that actually came next; no model gets it below the text's entropy."),
    ("Direct preference optimization", "Fitting a policy to preferred and rejected answers with one logistic loss on log-probability ratios: no reward model, no RL loop."),
    ("Distributed training", "One training run spread over many devices by splitting the data, the layers, the tensors or the optimizer state among them."),
    ("Dropout", "Zeroing random activations while training so no unit can be relied on alone; rarely used once pretraining reads each text once."),
    ("FlashAttention", "Exact attention computed tile by tile in fast on-chip memory, never writing out the full score matrix: faster, and less memory."),
    ("Instruction tuning", "Fine-tuning on many tasks written as instructions with answers, so the model follows instructions it was never trained on."),
    ("Knowledge distillation", "Training a small student to match a large teacher's output probabilities, not only the hard labels."),
    ("Masked language modeling", "Hiding some tokens and training the model to fill them in from both sides; the objective of BERT-style encoders."),
    ("Mixture of experts", "Many expert sub-networks and a router sending each token to a few: parameters grow while the compute per token does not."),
    ("Next-token prediction", "Predicting each token from the ones before it: the objective of GPT-style models, and how they generate text."),
    ("Pretraining", "The first, self-supervised stage: general patterns learned from a large unlabelled corpus, before any task."),
    ("Reinforcement learning from human feedback", "Reinforcement learning of a language model against a reward model fitted to human comparisons of its answers."),
    ("Reinforcement learning with verifiable rewards", "Reinforcement learning whose reward is a program that checks the answer (tests, a math checker), not a learned model."),
    ("Scaling laws", "Power laws that predict the loss from parameters, data and compute, used to size a model and its training for a budget."),
    ("Supervised fine-tuning", "More next-token training of a pretrained model on curated prompt–response examples, so it behaves like them."),
    ("Teacher forcing", "Feeding a sequence model the true previous tokens in training: every position trains at once, but it never sees its own slips."),
    ("Tokenization", "Cutting raw text into the integer tokens a model reads and writes, usually by byte-pair encoding."),
    ("ULMFiT", "Three stages for text: pretrain a language model, fine-tune it on the target domain, then train a classifier on it with care."),
    ("Word2vec", "Word vectors learned by predicting a word's neighbours, so similar words sit close and some relations become vector offsets."),
)
METHOD_NAMES = tuple(name for name, _ in METHODS)


def scenarios_by_method(scenarios) -> dict[str, list]:
    """Method name -> the scenarios (in gallery order) whose declared evidence shows it."""
    shown: dict[str, list] = {name: [] for name in METHOD_NAMES}
    for scenario in scenarios:
        for name in getattr(scenario, "methods", {}):
            if name in shown:
                shown[name].append(scenario)
    return shown


def method_coverage(scenarios) -> tuple[int, int, int]:
    """(methods shown in full by some scenario, methods shown only in part, all methods)."""
    by_method = scenarios_by_method(scenarios)
    full = sum(1 for name, found in by_method.items() if any(not s.methods[name].partial for s in found))
    part = sum(1 for name, found in by_method.items() if found and all(s.methods[name].partial for s in found))
    return full, part, len(METHOD_NAMES)
