package org.pyhudi.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.PartitionDirectory;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The base files of a Hudi scan as Spark's file index: each listing asks pyhudi's planner, which prunes by
 * partition, record key and column statistics from the table's metadata table (no data file is listed or
 * opened here). Spark still evaluates every filter on the rows it reads.
 */
public final class HudiFileIndex implements FileIndex {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final HudiPlanner planner;
  private final String options;
  private final Path root;
  private volatile List<FileStatus> all;

  public HudiFileIndex(HudiPlanner planner, String options, String root) {
    this.planner = planner;
    this.options = options;
    this.root = new Path(java.net.URI.create(root));
  }

  private static List<FileStatus> parse(String json) {
    List<FileStatus> out = new ArrayList<>();
    try {
      for (JsonNode f : JSON.readTree(json)) {
        out.add(new FileStatus(f.get(1).asLong(), false, 1, 0L, 0L,
            new Path(java.net.URI.create(f.get(0).asText()))));
      }
    } catch (java.io.IOException e) {
      throw new IllegalStateException("pyhudi: the planner's file list is not JSON: " + json, e);
    }
    return out;
  }

  private List<FileStatus> allFiles() {
    List<FileStatus> a = all;
    if (a == null) {
      a = parse(planner.files(options, "[]"));
      all = a;
    }
    return a;
  }

  @Override
  public Seq<Path> rootPaths() {
    return CollectionConverters.asScala(List.of(root)).toList();
  }

  @Override
  public Seq<PartitionDirectory> listFiles(Seq<Expression> partitionFilters, Seq<Expression> dataFilters) {
    List<Expression> filters = new ArrayList<>(CollectionConverters.asJava(partitionFilters));
    filters.addAll(CollectionConverters.asJava(dataFilters));
    String preds = Predicates.toJson(filters);
    List<FileStatus> files = preds.equals("[]") ? allFiles() : parse(planner.files(options, preds));
    PartitionDirectory dir = PartitionDirectory.apply(InternalRow.empty(), files.toArray(new FileStatus[0]));
    return CollectionConverters.asScala(List.of(dir)).toList();
  }

  @Override
  public String[] inputFiles() {
    return allFiles().stream().map(f -> f.getPath().toString()).toArray(String[]::new);
  }

  @Override
  public void refresh() {
    all = null;
  }

  @Override
  public long sizeInBytes() {
    long n = 0;
    for (FileStatus f : allFiles()) {
      n += f.getLen();
    }
    return n;
  }

  @Override
  public StructType partitionSchema() {
    return new StructType();
  }

  @Override
  public String toString() {
    return "HudiFileIndex(" + root + ")";
  }
}
