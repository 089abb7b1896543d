"""§6.1 — BLEU as the paper reported it, and as it should be reported today.

The paper scores translations with BLEU on newstest2014. Its numbers are *tokenized* BLEU,
computed the tensor2tensor way: both the system output and the reference are run through the
Moses tokenizer, hyphenated compounds are split so that "a-b" becomes "a ##AT##-##AT## b", and
the case-sensitive `multi-bleu.perl` script counts n-gram matches on those tokens. Such numbers
depend on the tokenizer and are not comparable across papers, which is why the field has since
moved to sacreBLEU: a fixed tokenizer applied to detokenized text, with a signature string that
records every setting.

This metric returns several scores for the same predictions and references:

- `bleu`: cased sacreBLEU on detokenized text with the 13a tokenizer, the number to report,
  with its `signature`, `counts`, `precisions`, `bp`, `sys_len` and `ref_len`;
- `bleu_lowercase_tokenized`: lowercased BLEU on 13a tokens, the convention of many small
  Multi30k papers (label it as such when comparing);
- `bleu_paper_tokenized`: the paper's tokenized BLEU with compound splitting (label it as
  tokenized BLEU; it is not comparable to `bleu`);
- `chrf`: sacreBLEU's chrF, a character n-gram F-score that complements BLEU.

Deviation: the paper tokenizes with the Moses tokenizer; sacremoses is not a dependency here,
so `bleu_paper_tokenized` tokenizes with sacreBLEU's 13a tokenizer (the mteval-v13a rules,
close to but not the same as Moses) before splitting compounds.

This file is loaded with `evaluate.load(<folder>)` and copied by `evaluate` into its cache, so
it imports nothing but evaluate, datasets, sacrebleu and re.
"""

import re

import datasets
import evaluate
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

_CITATION = """\
@inproceedings{vaswani2017attention,
  title={Attention Is All You Need},
  author={Vaswani, Ashish and Shazeer, Noam and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion
          and Gomez, Aidan N. and Kaiser, {\\L}ukasz and Polosukhin, Illia},
  booktitle={Advances in Neural Information Processing Systems},
  year={2017}
}
@inproceedings{post-2018-call,
  title={A Call for Clarity in Reporting {BLEU} Scores},
  author={Post, Matt},
  booktitle={Proceedings of the Third Conference on Machine Translation: Research Papers},
  year={2018},
  pages={186--191}
}
"""

_DESCRIPTION = """\
Cased detokenized sacreBLEU with its signature, together with lowercased 13a-tokenized BLEU,
the tokenized BLEU with compound splitting used by "Attention Is All You Need" (§6.1), and chrF.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): detokenized system outputs, one per segment.
    references (`list` of `str`, or `list` of `list` of `str`): detokenized references; one
        string per segment, or a list of several references per segment (the same number for
        every segment).
Returns:
    bleu (`float`): cased sacreBLEU (13a tokenizer), 0-100.
    signature (`str`): sacreBLEU's signature for `bleu`.
    counts, totals (`list` of `int`), precisions (`list` of `float`), bp (`float`),
    sys_len, ref_len (`int`): the statistics behind `bleu`.
    bleu_lowercase_tokenized (`float`) and signature_lowercase_tokenized (`str`).
    bleu_paper_tokenized (`float`) and signature_paper_tokenized (`str`): tokenized BLEU with
        compound splitting, as in the paper.
    chrf (`float`) and chrf_signature (`str`).
Examples:
    >>> metric = evaluate.load("path/to/vaswani_bleu")
    >>> result = metric.compute(predictions=["a cat sat on the mat"], references=["a cat sat on the mat"])
    >>> result["bleu"]
    100.0
"""

# tensor2tensor's get_ende_bleu.sh: perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'
_COMPOUND = re.compile(r"(\S)-(\S)")
_TOKENIZE_13A = Tokenizer13a()


def split_compounds(text):
    """Split hyphenated compounds the way the paper's scoring script does: "a-b" -> "a ##AT##-##AT## b".

    Like the Perl substitution it copies, matches do not overlap, so in "a-b-c" only the first
    hyphen is split.
    """
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", text)


def paper_tokenize(text):
    """Tokenize (13a, standing in for Moses) and then split compounds, as for the paper's BLEU."""
    return split_compounds(_TOKENIZE_13A(text))


def _as_reference_streams(references, num_predictions):
    """Turn per-segment references into sacreBLEU's layout: one list per reference "set"."""
    if len(references) != num_predictions:
        raise ValueError(
            f"got {num_predictions} predictions but {len(references)} references; "
            "pass one reference (or one list of references) per prediction."
        )
    per_segment = [[ref] if isinstance(ref, str) else list(ref) for ref in references]
    counts = {len(refs) for refs in per_segment}
    if len(counts) > 1:
        raise ValueError(
            f"every prediction needs the same number of references, got counts {sorted(counts)}."
        )
    if counts == {0}:
        raise ValueError("each prediction needs at least one reference.")
    return [list(stream) for stream in zip(*per_segment)]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class VaswaniBleu(evaluate.Metric):
    """Cased sacreBLEU plus the tokenized BLEU of the paper (§6.1), lowercased BLEU and chrF."""

    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(
                    {
                        "predictions": datasets.Value("string", id="sequence"),
                        "references": datasets.Sequence(datasets.Value("string", id="sequence"), id="references"),
                    }
                ),
                datasets.Features(
                    {
                        "predictions": datasets.Value("string", id="sequence"),
                        "references": datasets.Value("string", id="sequence"),
                    }
                ),
            ],
            reference_urls=["https://arxiv.org/abs/1706.03762", "https://github.com/mjpost/sacrebleu"],
        )

    def _compute(self, predictions, references):
        predictions = list(predictions)
        if not predictions:
            raise ValueError("no predictions to score: pass at least one segment.")
        streams = _as_reference_streams(references, len(predictions))

        # §6.1 as reported today: cased BLEU on detokenized text, 13a tokenizer.
        cased = BLEU(tokenize="13a", lowercase=False)
        cased_score = cased.corpus_score(predictions, streams)

        lowercase = BLEU(tokenize="13a", lowercase=True)
        lowercase_score = lowercase.corpus_score(predictions, streams)

        # §6.1 as the paper computed it: tokenize, split compounds, then case-sensitive BLEU
        # on the tokens as they stand (tokenize="none").
        paper = BLEU(tokenize="none", lowercase=False)
        paper_score = paper.corpus_score(
            [paper_tokenize(p) for p in predictions],
            [[paper_tokenize(r) for r in stream] for stream in streams],
        )

        chrf = CHRF()
        chrf_score = chrf.corpus_score(predictions, streams)

        return {
            "bleu": cased_score.score,
            "signature": str(cased.get_signature()),
            "counts": list(cased_score.counts),
            "totals": list(cased_score.totals),
            "precisions": list(cased_score.precisions),
            "bp": cased_score.bp,
            "sys_len": cased_score.sys_len,
            "ref_len": cased_score.ref_len,
            "bleu_lowercase_tokenized": lowercase_score.score,
            "signature_lowercase_tokenized": str(lowercase.get_signature()),
            "bleu_paper_tokenized": paper_score.score,
            "signature_paper_tokenized": str(paper.get_signature()) + "|pretok:13a+compound-split",
            "chrf": chrf_score.score,
            "chrf_signature": str(chrf.get_signature()),
        }
