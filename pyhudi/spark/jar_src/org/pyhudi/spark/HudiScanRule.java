package org.pyhudi.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation;
import org.apache.spark.sql.execution.datasources.v2.python.PythonTable;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractPartialFunction;

/**
 * An optimizer rule that hands Spark's own parquet reader the scans of pyhudi's Python data source that it can
 * read exactly (pyhudi's planner decides: copy-on-write snapshots and read-optimized queries of tables whose
 * files Spark reads as pyhudi does), with the base files pyhudi's planner prunes from the metadata table. The
 * filters of the query stay in the plan: Spark evaluates them on every row read.
 *
 * <p>In a session built with {@link HudiExtensions} the rule runs once per query before Spark pushes filters and
 * columns into scans (the Python source is then never asked to push filters for a scan handed over); in any
 * other session {@link #install} adds it to the optimizer's last batch, after that push-down.
 */
public final class HudiScanRule extends Rule<LogicalPlan> {
  private static final ObjectMapper JSON = new ObjectMapper();
  /**
   * The reader's options, over the session's: a planned base file that is missing or unreadable fails the query
   * (never skipped, whatever {@code spark.sql.files.ignoreMissingFiles} / {@code ignoreCorruptFiles} say, as
   * pyhudi's reader never skips one); dates and timestamps of files that are not Spark's are read as written
   * (proleptic Gregorian, as Avro, parquet-avro and pyarrow write them), neither rebased nor refused.
   */
  private static final scala.collection.immutable.Map<String, String> READ_OPTIONS =
      scala.collection.immutable.Map$.MODULE$.from(CollectionConverters.asScala(
          Map.of("ignoreMissingFiles", "false", "ignoreCorruptFiles", "false",
              "datetimeRebaseMode", "CORRECTED", "int96RebaseMode", "CORRECTED")));

  /** What {@link #install} registered for a session: the planner to call and the source names it answers. */
  private record Registration(HudiPlanner planner, Set<String> names) {}

  private static final Map<SparkSession, Registration> SESSIONS =
      Collections.synchronizedMap(new WeakHashMap<>());

  private final SparkSession spark;

  HudiScanRule(SparkSession spark) {
    this.spark = spark;
  }

  /**
   * Registers the planner for the sources named {@code names} in {@code spark}; a session built without
   * {@link HudiExtensions} gets the rule in its optimizer's last batch.
   */
  public static void install(SparkSession spark, HudiPlanner planner, String[] names) {
    spark.sessionState().optimizer();  // built from the session's extensions (HudiExtensions marks it)
    SESSIONS.put(spark, new Registration(planner, Set.of(names)));
    List<Rule<LogicalPlan>> rules = others(spark);
    if (!HudiExtensions.appliedTo(spark)) {
      rules.add(new HudiScanRule(spark));
    }
    spark.experimental().extraOptimizations_$eq(CollectionConverters.asScala(rules).toList());
  }

  /** Turns the rule off in {@code spark}. */
  public static void uninstall(SparkSession spark) {
    SESSIONS.remove(spark);
    spark.experimental().extraOptimizations_$eq(CollectionConverters.asScala(others(spark)).toList());
  }

  private static List<Rule<LogicalPlan>> others(SparkSession spark) {
    List<Rule<LogicalPlan>> rules = new ArrayList<>();
    for (Rule<LogicalPlan> r : CollectionConverters.asJava(spark.experimental().extraOptimizations())) {
      if (!(r instanceof HudiScanRule)) {
        rules.add(r);
      }
    }
    return rules;
  }

  private static PythonTable source(LogicalPlan p, Registration reg) {
    DataSourceV2Relation r = null;
    if (p instanceof DataSourceV2Relation rel) {
      r = rel;
    } else if (p instanceof DataSourceV2ScanRelation scan) {
      r = scan.relation();
    }
    if (r != null && r.table() instanceof PythonTable t && reg.names().contains(t.name())) {
      return t;
    }
    return null;
  }

  @Override
  public LogicalPlan apply(LogicalPlan plan) {
    Registration reg = SESSIONS.get(spark);
    if (reg == null || hasInvalidString(plan)) {
      return plan;
    }
    return plan.transformUp(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        return source(p, reg) != null;
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        if (p instanceof DataSourceV2Relation r && source(p, reg) != null) {
          return replace(p, r.options(), r.output(), reg.planner());
        } else if (p instanceof DataSourceV2ScanRelation s && source(p, reg) != null) {
          return replace(p, s.relation().options(), s.output(), reg.planner());
        }
        return p;
      }
    });
  }

  /**
   * Whether the plan compares with a string literal whose bytes are not UTF-8 (e.g. {@code cast(unhex('FF') as
   * string)}): Spark's parquet reader pushes it into row-group filters as a Java string, which replaces the
   * bytes, and skips row groups that hold matching rows. The Python source judges no such literal.
   */
  private static boolean hasInvalidString(LogicalPlan plan) {
    for (Expression e : CollectionConverters.asJava(plan.expressions())) {
      if (hasInvalidString(e)) {
        return true;
      }
    }
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      if (hasInvalidString(child)) {
        return true;
      }
    }
    return false;
  }

  private static boolean hasInvalidString(Expression e) {
    if (e instanceof Literal l && l.value() instanceof UTF8String s && !s.isValid()) {
      return true;
    }
    for (Expression child : CollectionConverters.asJava(e.children())) {
      if (hasInvalidString(child)) {
        return true;
      }
    }
    return false;
  }

  private LogicalPlan replace(LogicalPlan scan, CaseInsensitiveStringMap readOptions,
      Seq<AttributeReference> output, HudiPlanner planner) {
    List<StructField> fields = new ArrayList<>();
    for (AttributeReference a : CollectionConverters.asJava(output)) {
      fields.add(new StructField(a.name(), a.dataType(), a.nullable(), a.metadata()));
    }
    StructType dataSchema = new StructType(fields.toArray(new StructField[0]));
    String options = JSON.valueToTree(readOptions.asCaseSensitiveMap()).toString();
    JsonNode answer;
    try {
      answer = JSON.readTree(planner.describe(options, dataSchema.json()));
    } catch (java.io.IOException | RuntimeException | LinkageError e) {
      // the planner could not be asked (its process, Py4J): the Python source reads the scan, and says why
      // if something is wrong with it
      logWarning(() -> "pyhudi: Spark's parquet reader not used for a scan: " + e);
      return scan;
    }
    if (!answer.path("use").asBoolean(false)) {
      return scan;
    }
    HudiFileIndex index = new HudiFileIndex(planner, options, answer.get("root").asText());
    HudiParquetFormat format = new HudiParquetFormat(answer.path("push").asBoolean(true));
    HadoopFsRelation relation = new HadoopFsRelation(index, new StructType(), dataSchema, Option.empty(),
        format, READ_OPTIONS, spark);
    return LogicalRelation$.MODULE$.apply(relation, output, Option.empty(), false, Option.empty());
  }
}
