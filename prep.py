import sys
from pyhudi.spark.source import plan_query
from pyhudi.read.filters import Pred
def rep(path, preds, **opts):
    plan, r = plan_query({"path": path, **opts}, tuple(Pred(*p) for p in preds))
    return r.as_dict()
