package org.pyhudi.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.PartitionedFile;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Not;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.sources.StringContains;
import org.apache.spark.sql.sources.StringEndsWith;
import org.apache.spark.sql.sources.StringStartsWith;
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
 * Spark compares values: those on top-level integer, string, boolean, date, timestamp and decimal columns whose
 * dates and timestamps are after 1582 and whole milliseconds, and none when the read turns data skipping off.
 *
 * <p>A filter on a floating-point column is not pushed into the parquet reader: statistics leave NaN out of a
 * column chunk's min and max (Spark orders NaN above every number, so {@code f > 2.0} holds for it) and a
 * dictionary tells {@code -0.0} from {@code 0.0} (equal in Spark), so parquet would skip row groups that hold
 * matching rows. Nor is a filter with a timestamp finer than a millisecond: a file may store milliseconds
 * ({@code timestamp-millis} schemas, Flink, Hudi's {@code hoodie.parquet.outputtimestamptype}), and Spark rounds
 * the literal to them ({@code t < 00:00:00.0005} would skip rows at {@code 00:00:00.000}). Nor is one with a date
 * or time before 1583: Spark hands parquet's filters dates and times through the hybrid Julian calendar, which moves
 * those of its gap ({@code d > DATE'1582-10-10'} became {@code d > 1582-10-20}). Nested columns are not pushed
 * either. Spark evaluates every filter on the rows it reads, so a filter kept out of the reader only costs
 * reading.
 */
public final class HudiParquetFormat extends ParquetFileFormat {
  private static final long serialVersionUID = 1L;
  private final boolean push;

  /** {@code push}: whether any filter may reach parquet (false: the read turns data skipping off). */
  public HudiParquetFormat(boolean push) {
    this.push = push;
  }

  @Override
  public Function1<PartitionedFile, Iterator<InternalRow>> buildReaderWithPartitionValues(
      SparkSession spark, StructType dataSchema, StructType partitionSchema, StructType requiredSchema,
      Seq<Filter> filters, Map<String, String> options, Configuration hadoopConf) {
    Seq<Filter> pushed = push ? judgedExactly(filters, dataSchema)
        : CollectionConverters.asScala(new ArrayList<Filter>()).toList();
    return super.buildReaderWithPartitionValues(spark, dataSchema, partitionSchema, requiredSchema, pushed,
        options, hadoopConf);
  }

  /**
   * The filters of {@code filters} whose every column is a top-level column of {@code schema} of an exactly
   * judged type and whose every date and timestamp is exact (see the class comment).
   */
  public static Seq<Filter> judgedExactly(Seq<Filter> filters, StructType schema) {
    List<Filter> keep = new ArrayList<>();
    for (Filter f : CollectionConverters.asJava(filters)) {
      boolean exact = exactValues(f);
      for (String column : f.references()) {
        exact &= exactType(field(schema, column));
      }
      if (exact) {
        keep.add(f);
      }
    }
    return CollectionConverters.asScala(keep).toList();
  }

  /**
   * Whether every date and timestamp {@code f} compares with is after 1582 and a whole millisecond (false for a
   * filter not known here).
   */
  private static boolean exactValues(Filter f) {
    if (f instanceof And a) {
      return exactValues(a.left()) && exactValues(a.right());
    } else if (f instanceof Or o) {
      return exactValues(o.left()) && exactValues(o.right());
    } else if (f instanceof Not n) {
      return exactValues(n.child());
    } else if (f instanceof In in) {
      for (Object v : in.values()) {
        if (!exactValue(v)) {
          return false;
        }
      }
      return true;
    } else if (f instanceof EqualTo e) {
      return exactValue(e.value());
    } else if (f instanceof EqualNullSafe e) {
      return exactValue(e.value());
    } else if (f instanceof GreaterThan c) {
      return exactValue(c.value());
    } else if (f instanceof GreaterThanOrEqual c) {
      return exactValue(c.value());
    } else if (f instanceof LessThan c) {
      return exactValue(c.value());
    } else if (f instanceof LessThanOrEqual c) {
      return exactValue(c.value());
    }
    return f instanceof IsNull || f instanceof IsNotNull || f instanceof StringStartsWith
        || f instanceof StringEndsWith || f instanceof StringContains;
  }

  /** 1583-01-01T00:00Z in milliseconds since the epoch: dates and times before it are not pushed. */
  private static final long FIRST_EXACT_MILLIS = java.time.LocalDate.of(1583, 1, 1).toEpochDay() * 86_400_000L;

  private static boolean exactValue(Object v) {
    if (v instanceof java.sql.Timestamp t) {
      return t.getNanos() % 1_000_000 == 0 && t.getTime() >= FIRST_EXACT_MILLIS;
    } else if (v instanceof java.sql.Date d) {
      return d.getTime() >= FIRST_EXACT_MILLIS;
    } else if (v instanceof java.time.Instant i) {
      return i.getNano() % 1_000_000 == 0 && i.toEpochMilli() >= FIRST_EXACT_MILLIS;
    } else if (v instanceof java.time.LocalDateTime l) {
      return l.getNano() % 1_000_000 == 0 && l.getYear() >= 1583;
    } else if (v instanceof java.time.LocalDate l) {
      return l.getYear() >= 1583;
    }
    return true;
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
