package org.pyhudi.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.WeakHashMap;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation$;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
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
  /** The read option naming the file slices of a split scan one half reads (pyhudi.spark.source). */
  private static final String SLICES_OPTION = "pyhudi.internal.read.slices";
  /**
   * On a scan with a source object of its own, with {@link #OWN_TOKEN} as its value: its pushed filters may prune
   * (pyhudi.spark.source.OWN_OPTION). The value is this JVM's own random token, which pyhudi's source gets at
   * registration: a user's read option cannot turn pruning on for a shared source object.
   */
  private static final String OWN_OPTION = "pyhudi.internal.read.own";
  private static final String OWN_TOKEN = java.util.UUID.randomUUID().toString();
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

  /** The value of the read option that marks a scan with a source object of its own in this JVM. */
  public static String ownToken() {
    return OWN_TOKEN;
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
    if (reg == null) {
      return plan;
    }
    boolean invalid = hasInvalidString(plan);
    // top down: the Filter and Project nodes right above a scan are taken with it (a split scan repeats them
    // over each half, so each half is pruned and pushed down as the scan was)
    // the scans made here, not taken again; a scan node the plan holds twice (one relation object at two places)
    // is taken at each, each getting a source object of its own
    Set<LogicalPlan> asked = Collections.newSetFromMap(new IdentityHashMap<>());
    return plan.transformDown(new AbstractPartialFunction<LogicalPlan, LogicalPlan>() {
      @Override
      public boolean isDefinedAt(LogicalPlan p) {
        LogicalPlan scan = chainScan(p, reg);
        return scan != null && !asked.contains(scan);
      }

      @Override
      public LogicalPlan apply(LogicalPlan p) {
        LogicalPlan scan = chainScan(p, reg);
        LogicalPlan own = ownSource(scan);  // the scan itself after the push-down
        asked.add(own);
        return replaceChain(rebuild(p, scan, own, Map.of()), own, reg.planner(), invalid);
      }
    });
  }

  /**
   * {@code scan} with a source object of its own, its output unchanged. PySpark keeps the partitions a Python
   * source planned on the source object, which every scan of one DataFrame shares (the same DataFrame twice in a
   * query, each query of it): pushing a scan's filters replaces them, and every scan of the object reads the
   * last ones planned, those of another scan's filters. Marked with {@link #OWN_OPTION}: pyhudi's source prunes
   * by the filters pushed into such a scan only.
   */
  private static LogicalPlan ownSource(LogicalPlan scan) {
    if (!(scan instanceof DataSourceV2Relation r)) {
      return scan;  // after the push-down: too late (pushed filters do not prune in such a session)
    }
    Map<String, String> options = new HashMap<>(r.options().asCaseSensitiveMap());
    options.put(OWN_OPTION, OWN_TOKEN);
    Table table = freshTable((PythonTable) r.table(), options);
    return r.copy(table, r.output(), r.catalog(), r.identifier(), new CaseInsensitiveStringMap(options),
        r.timeTravelSpec());
  }

  /**
   * {@code t}'s source as a new source object's table. PySpark makes the Python source from the options of the
   * relation that holds the table (the caller's {@code options}); {@code getTable} is given them too.
   */
  private static Table freshTable(PythonTable t, Map<String, String> options) {
    PythonDataSourceV2 ds = new PythonDataSourceV2();
    ds.setShortName(t.name());
    return ds.getTable(t.schema(), new Transform[0], options);
  }

  /**
   * The scan of pyhudi's source at the bottom of {@code p}, when {@code p} is that scan or a chain of Filter and
   * attribute-only Project nodes over it (filters without subqueries, deterministic); else null. The Python half
   * of a split scan (its read options name its slices) is not taken again.
   */
  private static LogicalPlan chainScan(LogicalPlan p, Registration reg) {
    LogicalPlan cur = p;
    while (true) {
      if (source(cur, reg) != null) {
        CaseInsensitiveStringMap options = cur instanceof DataSourceV2Relation r ? r.options()
            : ((DataSourceV2ScanRelation) cur).relation().options();
        return options.containsKey(SLICES_OPTION) ? null : cur;
      }
      if (cur instanceof Filter f && f.condition().deterministic()
          && !SubqueryExpression.hasSubquery(f.condition())) {
        cur = f.child();
      } else if (cur instanceof Project pr && attributesOnly(pr)) {
        cur = pr.child();
      } else {
        return null;
      }
    }
  }

  private static boolean attributesOnly(Project p) {
    for (NamedExpression e : CollectionConverters.asJava(p.projectList())) {
      if (!(e instanceof AttributeReference)) {
        return false;
      }
    }
    return true;
  }

  /** {@code top} (a chain of Filter and Project nodes over {@code scan}, or the scan) with the scan replaced. */
  /**
   * {@code top} (a chain of Filter and Project nodes over {@code scan}, or the scan) with the scan replaced;
   * {@code top} itself when the plan holds a string literal that is not UTF-8 ({@code invalid}).
   */
  private LogicalPlan replaceChain(LogicalPlan top, LogicalPlan scan, HudiPlanner planner, boolean invalid) {
    if (invalid) {
      return top;
    }
    if (scan instanceof DataSourceV2Relation r) {
      return replace(top, scan, r, r.options(), r.output(), planner);
    }
    DataSourceV2ScanRelation s = (DataSourceV2ScanRelation) scan;
    return replace(top, scan, null, s.relation().options(), s.output(), planner);
  }

  /** {@code top} with {@code scan} below it replaced by {@code by}, expressions rewritten by {@code attrs}. */
  private static LogicalPlan rebuild(LogicalPlan top, LogicalPlan scan, LogicalPlan by,
      Map<ExprId, Attribute> attrs) {
    if (top == scan) {
      return by;
    }
    LogicalPlan child = rebuild(top.children().head(), scan, by, attrs);
    LogicalPlan node = top.withNewChildren(CollectionConverters.asScala(List.of(child)).toList());
    if (attrs.isEmpty()) {
      return node;
    }
    return node.transformExpressions(new AbstractPartialFunction<Expression, Expression>() {
      @Override
      public boolean isDefinedAt(Expression e) {
        return e instanceof AttributeReference a && attrs.containsKey(a.exprId());
      }

      @Override
      public Expression apply(Expression e) {
        return attrs.get(((AttributeReference) e).exprId());
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

  /**
   * {@code top} over Spark's parquet scan of {@code scan}'s files, or a Union of that and the Python source's
   * scan of the slices with log files ({@code relation}: the source's relation before push-down; a scan after
   * it is not split, the Python source reads it all), as pyhudi's planner answers; {@code top} itself when
   * the planner keeps the scan.
   */
  private LogicalPlan replace(LogicalPlan top, LogicalPlan scan, DataSourceV2Relation relation,
      CaseInsensitiveStringMap readOptions, Seq<AttributeReference> output, HudiPlanner planner) {
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
      return top;
    }
    if (!answer.path("use").asBoolean(false)) {
      return top;
    }
    JsonNode python = answer.get("python");
    if (python != null && relation == null) {
      return top;
    }
    HudiFileIndex index = new HudiFileIndex(planner, withOptions(options, answer.get("native")),
        answer.get("root").asText());
    HudiParquetFormat format = new HudiParquetFormat(answer.path("push").asBoolean(true));
    HadoopFsRelation files = new HadoopFsRelation(index, new StructType(), dataSchema, Option.empty(),
        format, READ_OPTIONS, spark);
    LogicalPlan parquet = rebuild(top, scan,
        LogicalRelation$.MODULE$.apply(files, output, Option.empty(), false, Option.empty()), Map.of());
    if (python == null) {
      return parquet;
    }
    DataSourceV2Relation half = pythonHalf(relation, python);
    List<AttributeReference> from = CollectionConverters.asJava(relation.output());
    List<AttributeReference> to = CollectionConverters.asJava(half.output());
    if (from.size() != to.size()) {
      return top;
    }
    Map<ExprId, Attribute> attrs = new HashMap<>();
    for (int i = 0; i < from.size(); i++) {
      attrs.put(from.get(i).exprId(), to.get(i));
    }
    LogicalPlan logs = rebuild(top, scan, half, attrs);
    return new Union(CollectionConverters.asScala(List.of(parquet, logs)).toList(), false, false);
  }

  /** The options JSON {@code options} with the entries of {@code extra} (a JSON object, or null) over them. */
  private static String withOptions(String options, JsonNode extra) {
    if (extra == null || !extra.isObject()) {
      return options;
    }
    try {
      com.fasterxml.jackson.databind.node.ObjectNode o =
          (com.fasterxml.jackson.databind.node.ObjectNode) JSON.readTree(options);
      o.setAll((com.fasterxml.jackson.databind.node.ObjectNode) extra);
      return o.toString();
    } catch (java.io.IOException e) {
      throw new IllegalStateException("pyhudi: read options are not JSON: " + options, e);
    }
  }

  /**
   * The Python source's scan of {@code r}'s table with the read options {@code extra} over {@code r}'s, with
   * new output attributes. A new source object: PySpark keeps the Python source it made with the first options
   * it was given on the object, which {@code r}'s table holds.
   */
  private static DataSourceV2Relation pythonHalf(DataSourceV2Relation r, JsonNode extra) {
    Map<String, String> options = new HashMap<>(r.options().asCaseSensitiveMap());
    extra.fields().forEachRemaining(e -> options.put(e.getKey(), e.getValue().asText()));
    Table table = freshTable((PythonTable) r.table(), options);
    return DataSourceV2Relation.create(table, r.catalog(), r.identifier(),
        new CaseInsensitiveStringMap(options), Option.empty());
  }
}
