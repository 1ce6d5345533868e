package web

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsCollector reads the node's figures when Prometheus scrapes.
type metricsCollector struct {
	s         *Server
	connected *prometheus.Desc
	folders   *prometheus.Desc
	needBytes *prometheus.Desc
	needFiles *prometheus.Desc
}

func newMetricsCollector(s *Server) *metricsCollector {
	return &metricsCollector{
		s:         s,
		connected: prometheus.NewDesc("lockstep_connected_devices", "Devices connected now.", nil, nil),
		folders:   prometheus.NewDesc("lockstep_folders", "Folders configured.", nil, nil),
		needBytes: prometheus.NewDesc("lockstep_folder_need_bytes", "Bytes this device still needs in a folder.", []string{"folder"}, nil),
		needFiles: prometheus.NewDesc("lockstep_folder_need_files", "Files this device still needs in a folder.", []string{"folder"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (m *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.connected
	ch <- m.folders
	ch <- m.needBytes
	ch <- m.needFiles
}

// Collect implements prometheus.Collector.
func (m *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(m.connected, prometheus.GaugeValue, float64(len(m.s.cfg.Conns.Connections())))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	folders, err := m.s.folderStatuses(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(m.folders, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(m.folders, prometheus.GaugeValue, float64(len(folders)))
	for _, f := range folders {
		ch <- prometheus.MustNewConstMetric(m.needBytes, prometheus.GaugeValue, float64(f.NeedBytes), f.ID)
		ch <- prometheus.MustNewConstMetric(m.needFiles, prometheus.GaugeValue, float64(f.NeedFiles), f.ID)
	}
}

// metricsHandler serves /metrics from a registry of the node's own.
func (s *Server) metricsHandler() echo.HandlerFunc {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMetricsCollector(s))
	return echo.WrapHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}
