"""Judge validation: how far each metric's judge can be trusted, against people and against other judges.

Public (for the DAGs, the CLI and the page):
- `annotation`: blind samples of judged units out to annotators, their labels in;
- `annotation_units`: what a human or a second judge answers, item by item, for a month's judgments;
- `rater_agreement`: agreement statistics between two raters (percent agreement, kappa, alpha), no database;
- `judge_vs_humans`: our judge's labels against human labels, per metric, stored for the page;
- `judge_comparison`: another judge over the same month: would it have told the same story?
- `drift`: a fixed calibration slice re-judged every month, alarming when the judge moves.

Three kinds of "agreement" live in three places, one meaning each (docs/ARCHITECTURE.md, Glossary): rater
statistics here in `rater_agreement`, the judge against people in `judge_vs_humans`, and the rank
correlation between families' boards in `boards.rank_agreement`.
"""

__all__ = ["annotation", "annotation_units", "drift", "judge_comparison", "judge_vs_humans", "rater_agreement"]
