package org.pyhudi.spark;

import java.util.Collections;
import java.util.Set;
import java.util.WeakHashMap;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * {@code spark.sql.extensions=org.pyhudi.spark.HudiExtensions}: {@link HudiScanRule} among the rules Spark runs
 * once per query just before it pushes filters and columns into scans.
 */
public final class HudiExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit> {
  private static final Set<SparkSession> APPLIED = Collections.synchronizedSet(
      Collections.newSetFromMap(new WeakHashMap<>()));

  /** Whether {@code spark}'s optimizer has the rule from these extensions. */
  public static boolean appliedTo(SparkSession spark) {
    return APPLIED.contains(spark);
  }

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectPreCBORule(new AbstractFunction1<SparkSession, Rule<LogicalPlan>>() {
      @Override
      public Rule<LogicalPlan> apply(SparkSession spark) {
        APPLIED.add(spark);
        return new HudiScanRule(spark);
      }
    });
    return BoxedUnit.UNIT;
  }
}
