"""Human raters against LLM judges: the figures of issue 7 over judged answers.

``sources`` builds a ``ComparisonInput`` from a project and its judge runs or from CSV files;
``report.compare`` turns it into the comparison's JSON.
"""
