package org.pyhudi.spark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DateType;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;
import scala.Function1;
import scala.collection.Iterator;
import scala.collection.immutable.Map;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Spark's parquet format, given only the filters that parquet's row-group statistics and dictionaries judge as
 * Spark compares values: those on top-level integer, string, boolean, date, timestamp and decimal columns, except
 * the columns pyhudi's planner names (timestamps some commit recorded in milliseconds: Spark's parquet filters
 * round a literal to the file's unit), and none when the read turns data skipping off.
 *
 * <p>A filter on a floating-point column is not pushed into the parquet reader: statistics leave NaN out of a
 * column chunk's min and max (Spark orders NaN above every number, so {@code f > 2.0} holds for it) and a
 * dictionary tells {@code -0.0} from {@code 0.0} (equal in Spark), so parquet would skip row groups that hold
 * matching rows. Nested columns are not pushed either. Spark evaluates every filter on the rows it reads, so a
 * filter kept out of the reader only costs reading.
 */
public final class HudiParquetFormat extends ParquetFileFormat {
  private static final long serialVersionUID = 1L;
  private final boolean push;
  private final HashSet<String> unpushed;

  /** {@code push}: whether any filter may reach parquet; {@code unpushed}: columns whose filters never do. */
  public HudiParquetFormat(boolean push, List<String> unpushed) {
    this.push = push;
    this.unpushed = new HashSet<>(unpushed);
  }

  @Override
  public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
      SparkSession spark, StructType dataSchema, StructType partitionSchema, StructType requiredSchema,
      Seq<Filter> filters, Map<String, String> options, Configuration hadoopConf) {
    Seq<Filter> pushed = push ? judgedExactly(filters, dataSchema, unpushed)
        : CollectionConverters.asScala(new ArrayList<Filter>()).toList();
    return super.buildReaderWithPartitionValues(spark, dataSchema, partitionSchema, requiredSchema, pushed,
        options, hadoopConf);
  }

  /**
   * The filters of {@code filters} whose every column is a top-level column of {@code schema} of an exactly
   * judged type and not in {@code unpushed}.
   */
  public static Seq<Filter> judgedExactly(Seq<Filter> filters, StructType schema, Set<String> unpushed) {
    List<Filter> keep = new ArrayList<>();
    for (Filter f : CollectionConverters.asJava(filters)) {
      boolean exact = true;
      for (String column : f.references()) {
        exact &= !unpushed.contains(column) && exactType(field(schema, column));
      }
      if (exact) {
        keep.add(f);
      }
    }
    return CollectionConverters.asScala(keep).toList();
  }

  private static StructField field(StructType schema, String name) {
    if (name.contains(".") || name.contains("`")) {
      return null;  // a nested column ("a.b") or a quoted name with a dot ("`a.b`"): not told apart here
    }
    for (StructField f : schema.fields()) {
      if (f.name().equals(name)) {
        return f;
      }
    }
    return null;
  }

  private static boolean exactType(StructField f) {
    if (f == null) {
      return false;
    }
    DataType t = f.dataType();
    return t instanceof ByteType || t instanceof ShortType || t instanceof IntegerType || t instanceof LongType
        || t instanceof StringType || t instanceof BooleanType || t instanceof DateType
        || t instanceof TimestampType || t instanceof DecimalType;
  }
}
