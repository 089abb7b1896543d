"""§6.1 — BLEU as the paper reported it, and as it should be reported today.

The paper's numbers are tokenized BLEU, computed the tensor2tensor way: output and reference Moses-tokenized,
"a-b" split to "a ##AT##-##AT## b", n-grams counted case-sensitively by multi-bleu.perl. Such numbers depend on
the tokenizer, hence sacreBLEU: a fixed tokenizer on detokenized text, with a signature of every setting.
Deviation: sacremoses is not a dependency, so the paper-style score tokenizes with sacreBLEU's 13a rules
(close to Moses, not the same). Loaded by `evaluate.load(<folder>)`, which copies this file into its cache:
it imports nothing but evaluate, datasets, sacrebleu and re.
"""

import re

import datasets
import evaluate
from sacrebleu.metrics import BLEU, CHRF
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

_CITATION = """\
@inproceedings{vaswani2017attention, title={Attention Is All You Need}, author={Vaswani, Ashish and Shazeer, Noam
  and Parmar, Niki and Uszkoreit, Jakob and Jones, Llion and Gomez, Aidan N. and Kaiser, {\\L}ukasz and Polosukhin,
  Illia}, booktitle={Advances in Neural Information Processing Systems}, year={2017}}
@inproceedings{post-2018-call, title={A Call for Clarity in Reporting {BLEU} Scores}, author={Post, Matt},
  booktitle={Proceedings of the Third Conference on Machine Translation: Research Papers}, year={2018},
  pages={186--191}}
"""

_DESCRIPTION = """\
Cased detokenized sacreBLEU with its signature, together with lowercased 13a-tokenized BLEU,
the tokenized BLEU with compound splitting used by "Attention Is All You Need" (§6.1), and chrF.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions (`list` of `str`): detokenized system outputs, one per segment.
    references (`list` of `str`, or `list` of `list` of `str`): one reference per segment, or the same
        number of references for every segment.
Returns:
    bleu (the number to report), signature, counts, totals, precisions, bp, sys_len, ref_len: cased sacreBLEU
    (13a); bleu_lowercase_tokenized and its signature: lowercased 13a BLEU (many Multi30k papers);
    bleu_paper_tokenized and its signature: the paper's tokenized BLEU with compound splitting (not comparable
    to `bleu`); chrf, chrf_signature: sacreBLEU's chrF.
"""

# tensor2tensor's get_ende_bleu.sh: perl -ple 's{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g'
_COMPOUND = re.compile(r"(\S)-(\S)")
_TOKENIZE_13A = Tokenizer13a()


def split_compounds(text):
    """"a-b" -> "a ##AT##-##AT## b"; like the Perl it copies, matches do not overlap ("a-b-c": first hyphen only)."""
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", text)


def paper_tokenize(text):
    """Tokenize (13a, standing in for Moses) and then split compounds, as for the paper's BLEU."""
    return split_compounds(_TOKENIZE_13A(text))


def _as_reference_streams(references, num_predictions):
    """Per-segment references in sacreBLEU's layout: one list per reference "set"."""
    if len(references) != num_predictions:
        raise ValueError(f"got {num_predictions} predictions but {len(references)} references; "
                         "pass one reference (or one list of references) per prediction.")
    per_segment = [[ref] if isinstance(ref, str) else list(ref) for ref in references]
    counts = {len(refs) for refs in per_segment}
    if len(counts) > 1:
        raise ValueError(f"every prediction needs the same number of references, got counts {sorted(counts)}.")
    if counts == {0}:
        raise ValueError("each prediction needs at least one reference.")
    return [list(stream) for stream in zip(*per_segment)]


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class VaswaniBleu(evaluate.Metric):
    """Cased sacreBLEU plus the tokenized BLEU of the paper (§6.1), lowercased BLEU and chrF."""

    def _info(self):
        string = datasets.Value("string", id="sequence")
        return evaluate.MetricInfo(
            description=_DESCRIPTION, citation=_CITATION, inputs_description=_KWARGS_DESCRIPTION,
            features=[datasets.Features({"predictions": string,
                                         "references": datasets.Sequence(string, id="references")}),
                      datasets.Features({"predictions": string, "references": string})],
            reference_urls=["https://arxiv.org/abs/1706.03762", "https://github.com/mjpost/sacrebleu"])

    def _compute(self, predictions, references):
        predictions = list(predictions)
        if not predictions:
            raise ValueError("no predictions to score: pass at least one segment.")
        streams = _as_reference_streams(references, len(predictions))
        cased, lowercase = BLEU(tokenize="13a", lowercase=False), BLEU(tokenize="13a", lowercase=True)
        # As the paper computed it: tokenize, split compounds, then cased BLEU on the tokens as they stand.
        paper, chrf = BLEU(tokenize="none", lowercase=False), CHRF()
        cased_score = cased.corpus_score(predictions, streams)
        paper_score = paper.corpus_score([paper_tokenize(p) for p in predictions],
                                         [[paper_tokenize(r) for r in stream] for stream in streams])
        return {
            "bleu": cased_score.score, "signature": str(cased.get_signature()),
            "counts": list(cased_score.counts), "totals": list(cased_score.totals),
            "precisions": list(cased_score.precisions), "bp": cased_score.bp,
            "sys_len": cased_score.sys_len, "ref_len": cased_score.ref_len,
            "bleu_lowercase_tokenized": lowercase.corpus_score(predictions, streams).score,
            "signature_lowercase_tokenized": str(lowercase.get_signature()),
            "bleu_paper_tokenized": paper_score.score,
            "signature_paper_tokenized": str(paper.get_signature()) + "|pretok:13a+compound-split",
            "chrf": chrf.corpus_score(predictions, streams).score, "chrf_signature": str(chrf.get_signature()),
        }
