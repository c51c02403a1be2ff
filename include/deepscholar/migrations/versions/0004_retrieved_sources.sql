-- false: a source the system retrieved but its report does not list (an external system's paper.csv rows
-- or ctxs the text never cites). Kept so leakage is checked on everything the system used; [n] never
-- resolves to it, and the metrics and citation counts read cited sources only. Existing rows are cited.
ALTER TABLE deepscholar.report_sources ADD COLUMN cited boolean NOT NULL DEFAULT true;
-- Leaked sources among the retrieved-but-uncited ones; n_leaked_sources counts the cited sources only.
ALTER TABLE deepscholar.reports ADD COLUMN n_leaked_retrieved integer NOT NULL DEFAULT 0;
